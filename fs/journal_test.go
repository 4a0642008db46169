package fs

import (
	"fmt"
	"testing"
)

// TestChangedSinceRemembersBoundedly: a journal tells the keys changed
// since a given change, and once it has forgotten changes made since, it
// answers that any key may have changed.
func TestChangedSinceRemembersBoundedly(t *testing.T) {
	j := &journal{touched: map[string]uint64{}}
	j.touchLocked([]string{"a"})
	seq := j.seq
	j.touchLocked([]string{"b", "c"})
	for key, want := range map[string]bool{"a": false, "b": true, "c": true, "d": false} {
		if got := j.changedSince(key, seq); got != want {
			t.Errorf("%s changed since %d: %v, want %v", key, seq, got, want)
		}
	}
	for i := range 2 * maxTouched {
		j.touchLocked([]string{fmt.Sprint("k", i)})
	}
	if len(j.touches) >= 2*maxTouched || len(j.touched) > 2*maxTouched {
		t.Errorf("%d touches and %d keys kept", len(j.touches), len(j.touched))
	}
	if !j.changedSince("d", seq) {
		t.Error("a change since a forgotten one is not known to have missed d")
	}
	if j.changedSince("d", j.seq) || !j.changedSince(fmt.Sprint("k", 2*maxTouched-1), j.seq-1) {
		t.Error("the last changes are not told")
	}
}
