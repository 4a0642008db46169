package fs

import (
	"fmt"
	"testing"
	"time"
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

// TestLingerEndsUnderAStream: while changes keep coming, the committer's
// linger ends all the same (at lingerMax), so a steady stream of changes
// is committed in batches, not held back. The deadline is far beyond
// lingerMax: the test fails only if linger waits as long as changes come.
func TestLingerEndsUnderAStream(t *testing.T) {
	j := &journal{touched: map[string]uint64{}, hurry: make(chan struct{}, 1)}
	done := make(chan struct{})
	go func() { j.linger(); close(done) }()
	tick := time.NewTicker(quiet / 10)
	defer tick.Stop()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case <-done:
			return
		case <-tick.C: // a change
			j.mu.Lock()
			j.touchLocked([]string{"k"})
			j.mu.Unlock()
		case <-deadline:
			t.Fatal("linger did not end while changes kept coming")
		}
	}
}
