package storetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// A step is one operation of a semantics scenario on key "k". Rows are
// named by labels whose first letter says what the row must be:
// a versioned row, n null row, d versioned delete marker, m null delete
// marker.
type step func(e *env, rows map[string]*meta.Version)

func put(label string) step {
	return func(e *env, rows map[string]*meta.Version) { rows[label] = e.put("k") }
}

// del is DELETE k; label is "" where no marker may be written.
func del(label string) step {
	return func(e *env, rows map[string]*meta.Version) {
		e.t.Helper()
		v := e.del("k")
		if (v == nil) != (label == "") {
			e.t.Fatalf("DeleteMutation in a %s bucket wrote marker %s, want %q", e.b.Versioning, show(v), label)
		}
		if v != nil {
			rows[label] = v
		}
	}
}

// delVersion is DELETE k?versionId=<label's id>.
func delVersion(label string) step {
	return func(e *env, rows map[string]*meta.Version) { e.delVersion("k", rows[label].ID) }
}

// delNull is DELETE k?versionId=null.
func delNull(e *env, _ map[string]*meta.Version) {
	e.t.Helper()
	v, err := meta.Lookup(e.ctx, e.s, e.b, "k", meta.NullVersion)
	if err != nil {
		e.t.Fatalf("Lookup(k, null): %v", err)
	}
	e.delVersion("k", v.ID)
}

func setState(v meta.Versioning) step {
	return func(e *env, _ map[string]*meta.Version) { e.setVersioning(v) }
}

// scenarios are the semantics table of DESIGN.md, row by row and state by
// state: the steps start from a bucket in state, and want lists k's rows
// afterwards, newest first.
var scenarios = []struct {
	name  string
	state meta.Versioning
	steps []step
	want  string
}{
	{"enabled/put adds a row at the head", meta.Enabled,
		[]step{put("a1"), put("a2")}, "a2 a1"},
	{"enabled/delete writes a marker", meta.Enabled,
		[]step{put("a1"), del("d1")}, "d1 a1"},
	{"enabled/delete of a missing key writes a marker", meta.Enabled,
		[]step{del("d1")}, "d1"},
	{"enabled/delete of a deleted key stacks markers", meta.Enabled,
		[]step{put("a1"), del("d1"), del("d2")}, "d2 d1 a1"},
	{"enabled/removing the latest promotes the next", meta.Enabled,
		[]step{put("a1"), put("a2"), delVersion("a2")}, "a1"},
	{"enabled/removing a noncurrent row", meta.Enabled,
		[]step{put("a1"), put("a2"), put("a3"), delVersion("a2")}, "a3 a1"},
	{"enabled/removing the latest promotes a marker", meta.Enabled,
		[]step{put("a1"), del("d1"), put("a2"), delVersion("a2")}, "d1 a1"},
	{"enabled/removing the marker undeletes", meta.Enabled,
		[]step{put("a1"), del("d1"), delVersion("d1")}, "a1"},
	{"enabled/removing every row", meta.Enabled,
		[]step{put("a1"), put("a2"), delVersion("a1"), delVersion("a2")}, ""},
	{"enabled/after unversioned keeps the null row", meta.Unversioned,
		[]step{put("n1"), setState(meta.Enabled), put("a1"), del("d1")}, "d1 a1 n1"},

	{"suspended/put replaces the null row", meta.Suspended,
		[]step{put("n1"), put("n2")}, "n2"},
	{"suspended/null after versioned rows is the latest", meta.Enabled,
		[]step{put("a1"), put("a2"), setState(meta.Suspended), put("n1")}, "n1 a2 a1"},
	{"suspended/put replaces only the null row", meta.Enabled,
		[]step{put("a1"), setState(meta.Suspended), put("n1"), setState(meta.Enabled), put("a2"),
			setState(meta.Suspended), put("n2")}, "n2 a2 a1"},
	{"suspended/delete replaces the null row with a null marker", meta.Enabled,
		[]step{put("a1"), setState(meta.Suspended), put("n1"), del("m1")}, "m1 a1"},
	{"suspended/delete of a missing key writes a null marker", meta.Suspended,
		[]step{del("m1")}, "m1"},
	{"suspended/removing the null version", meta.Enabled,
		[]step{put("a1"), setState(meta.Suspended), put("n1"), delNull}, "a1"},
	{"suspended/removing a versioned row", meta.Enabled,
		[]step{put("a1"), put("a2"), setState(meta.Suspended), delVersion("a2")}, "a1"},
	{"suspended/a put after removing the null version", meta.Enabled,
		[]step{put("a1"), setState(meta.Suspended), put("n1"), delVersion("n1"), put("n2")}, "n2 a1"},
	{"suspended/removing the null marker undeletes", meta.Enabled,
		[]step{put("a1"), setState(meta.Suspended), del("m1"), delNull}, "a1"},
	{"suspended/then enabled keeps the null row", meta.Suspended,
		[]step{put("n1"), setState(meta.Enabled), put("a1"), put("a2")}, "a2 a1 n1"},

	{"unversioned/put replaces the only row", meta.Unversioned,
		[]step{put("n1"), put("n2")}, "n2"},
	{"unversioned/delete removes the row", meta.Unversioned,
		[]step{put("n1"), del("")}, ""},
	{"unversioned/delete of a missing key", meta.Unversioned,
		[]step{del("")}, ""},
	{"unversioned/removing the null version", meta.Unversioned,
		[]step{put("n1"), delNull}, ""},
	{"unversioned/removing the row by id", meta.Unversioned,
		[]step{put("n1"), delVersion("n1")}, ""},
}

func testSemantics(t *testing.T, open Opener) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			e := newEnv(t, open, sc.state)
			// Neighbours: "kk" shares k's bytes, "j" sorts before it.
			e.put("j")
			e.put("kk")
			rows := map[string]*meta.Version{}
			for _, s := range sc.steps {
				s(e, rows)
			}
			e.expectKey(rows, strings.Fields(sc.want))
			e.expectState()
		})
	}
}

// expectKey checks k's rows, read straight from the backend, against the
// labels of want, that every other labelled row is gone, and GET latest.
func (e *env) expectKey(rows map[string]*meta.Version, want []string) {
	e.t.Helper()
	got, err := drain(e.s.Scan(e.ctx, e.b, meta.ScanOptions{Prefix: "k"}))
	if err != nil {
		e.t.Fatalf("Scan(k): %v", err)
	}
	got = slices.DeleteFunc(got, func(v *meta.Version) bool { return v.Key != "k" })
	var wantRows []*meta.Version
	for _, l := range want {
		wantRows = append(wantRows, rows[l])
	}
	e.expectRows("rows of k", got, wantRows)
	for i, l := range want {
		null, marker := strings.ContainsRune("nm", rune(l[0])), strings.ContainsRune("dm", rune(l[0]))
		if got[i].Null != null || got[i].DeleteMarker != marker {
			e.t.Fatalf("row %s: Null, DeleteMarker = %v, %v; want %v, %v", l, got[i].Null, got[i].DeleteMarker, null, marker)
		}
	}
	for l, v := range rows {
		if !slices.Contains(want, l) {
			e.expectGone("k", v.ID)
		}
	}
	e.expectLatest("k") // ErrNoSuchKey when k has no rows, though "kk" has
}
