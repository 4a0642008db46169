package meta

import (
	"errors"
	"sort"
	"testing"
	"time"
)

func TestVersionIDOrderIsNewestFirst(t *testing.T) {
	// After anything the shared id clock may have issued already.
	base := time.Now().Add(time.Hour)
	var ids []VersionID
	for i := 0; i < 100; i++ {
		ids = append(ids, NewVersionID(base.Add(time.Duration(i)*time.Millisecond)))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i].Compare(ids[i-1]) >= 0 {
			t.Fatalf("id %d (%s) does not sort before the older id %d (%s)", i, ids[i], i-1, ids[i-1])
		}
		if ids[i].String() >= ids[i-1].String() {
			t.Fatalf("wire form of id %d does not sort before id %d", i, i-1)
		}
	}
	if got := ids[5].Time(); !got.Equal(base.Add(5 * time.Millisecond)) {
		t.Fatalf("Time() = %v, want %v", got, base.Add(5*time.Millisecond))
	}
}

func TestVersionIDMonotonicUnderStalledClock(t *testing.T) {
	stuck := time.Now().Add(time.Second)
	seen := map[int64]bool{}
	var prev VersionID
	for i := 0; i < 1000; i++ {
		id := NewVersionID(stuck)
		ns := id.Time().UnixNano()
		if seen[ns] {
			t.Fatalf("timestamp %d issued twice", ns)
		}
		seen[ns] = true
		if i > 0 && id.Compare(prev) >= 0 {
			t.Fatalf("id %d does not sort before its predecessor", i)
		}
		prev = id
	}
	// A clock that steps back still yields newer ids.
	back := NewVersionID(stuck.Add(-time.Hour))
	if back.Compare(prev) >= 0 {
		t.Fatal("id issued after a clock step back sorts as older")
	}
}

func TestParseVersionID(t *testing.T) {
	id := NewVersionID(time.Now())
	got, err := ParseVersionID(id.String())
	if err != nil || got != id {
		t.Fatalf("round trip: got %v, %v; want %v", got, err, id)
	}
	for _, bad := range []string{"", "null", "xyz", id.String()[:31], id.String() + "0",
		"0123456789ABCDEF0123456789abcdef", "0123456789abcdef0123456789abcdeg"} {
		if _, err := ParseVersionID(bad); !errors.Is(err, ErrInvalidVersionID) {
			t.Errorf("ParseVersionID(%q) = %v, want ErrInvalidVersionID", bad, err)
		}
	}
}

func TestAsOfBoundsRowsOfAnInstant(t *testing.T) {
	// Ids are built by hand: the process clock may already be past at.
	idAt := func(t time.Time, rnd byte) VersionID {
		id := AsOf(t)
		id[15] = rnd
		return id
	}
	at := time.Date(2026, 12, 2, 10, 15, 0, 0, time.UTC)
	for _, c := range []struct {
		id      VersionID
		visible bool
	}{
		{idAt(at.Add(-time.Nanosecond), 0xff), true},
		{idAt(at, 0), true},
		{idAt(at, 0xff), true},
		{idAt(at.Add(time.Nanosecond), 0), false},
	} {
		if got := c.id.Compare(AsOf(at)) >= 0; got != c.visible {
			t.Errorf("id at %v: visible as of %v = %v, want %v", c.id.Time(), at, got, c.visible)
		}
	}
	// Instants an id cannot hold: before 1970 nothing is visible yet,
	// after 2262 everything is.
	id := idAt(at, 0x80)
	for _, c := range []struct {
		at      string
		visible bool
	}{
		{"1969-12-31T23:59:59Z", false},
		{"1600-01-01T00:00:00Z", false},
		{"2262-04-12T00:00:00Z", true},
		{"9999-12-31T23:59:59Z", true},
	} {
		instant, _ := time.Parse(time.RFC3339, c.at)
		if got := id.Compare(AsOf(instant)) >= 0; got != c.visible {
			t.Errorf("id at %v: visible as of %s = %v, want %v", id.Time(), c.at, got, c.visible)
		}
	}
}

func FuzzParseVersionID(f *testing.F) {
	f.Add(NewVersionID(time.Now()).String())
	f.Add("null")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseVersionID(s)
		if err != nil {
			return
		}
		if id.String() != s {
			t.Fatalf("accepted %q but prints %q", s, id.String())
		}
	})
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a/", "a0"}, {"a", "b"}, {"a\xff", "b"}, {"\xff\xff", ""}, {"", ""}, {"日", "\xe6\x97\xa6"},
	} {
		if got := PrefixEnd(c.in); got != c.want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	keys := []string{"a", "a/", "a/b", "a0", "a\x00", "a/\xff", "b"}
	sort.Strings(keys)
	for _, p := range []string{"a", "a/"} {
		end := PrefixEnd(p)
		for _, k := range keys {
			under := len(k) >= len(p) && k[:len(p)] == p
			if under != (k >= p && k < end) {
				t.Errorf("prefix %q end %q misclassifies %q", p, end, k)
			}
		}
	}
}
