package fs

import (
	"slices"
	"syscall"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

func TestMergerLetsDirectoriesWinAndSkipsBadNames(t *testing.T) {
	m := merger{prefix: "p/"}
	var out []dirent
	file := func(name string) { out = m.key(out, dirent{name: name, mode: syscall.S_IFREG}, "p/"+name) }
	// Key order: "a" < "a-b" < "a-b/" < "a/" < "b" < "c" < "c/"; "p/"
	// itself (the marker) and "p//" (an empty name) are not entries.
	file("")
	out = m.dir(out, "p//")
	file("a")
	file("a-b")
	out = m.dir(out, "p/a-b/")
	out = m.dir(out, "p/a/")
	file("b")
	file("c")
	out = m.dir(out, "p/c/")
	file("..")
	out = m.end(out)
	var got []string
	for _, e := range out {
		kind := "f"
		if e.mode == syscall.S_IFDIR {
			kind = "d"
		}
		got = append(got, kind+":"+e.name)
	}
	want := []string{"d:a-b", "d:a", "f:b", "d:c"}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}

func TestOverlayShowsQueuedChangesWithinThePage(t *testing.T) {
	v := func(key string) *meta.Version { return &meta.Version{Key: key} }
	marker := &meta.Version{Key: "p/c", DeleteMarker: true}
	newer := v("p/d")
	res := &meta.ListResult{
		Objects:        []*meta.Version{v("p/c"), v("p/d"), v("p/k")},
		CommonPrefixes: []string{"p/e/"},
		IsTruncated:    true, Next: "p/m",
	}
	heads := map[string]queuedHead{
		"p/c":   {v: marker}, // deleted: dropped
		"p/d":   {v: newer},  // rewritten: its queued version
		"p/f":   {v: v("p/f")},
		"p/h":   {},              // removed from an unversioned bucket
		"p/a":   {v: v("p/a")},   // before the page: an earlier page's
		"p/z":   {v: v("p/z")},   // after the page: the next page's
		"p/g/x": {v: v("p/g/x")}, // makes directory g
		"p/e/y": {v: v("p/e/y")}, // in a directory listed already
		"p/":    {v: v("p/")},    // the directory's own marker
		"p/q/r": {v: v("p/q/r")}, // after the page
	}
	objs, cps := overlay("p/", "p/b", res, heads)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	if !slices.Equal(keys, []string{"p/d", "p/f", "p/k"}) || objs[0] != newer {
		t.Errorf("objects %q (the queued version of p/d: %v)", keys, objs[0] == newer)
	}
	if !slices.Equal(cps, []string{"p/e/", "p/g/"}) {
		t.Errorf("common prefixes %q", cps)
	}
	if objs, cps := overlay("p/", "p/b", res, nil); len(objs) != 3 || len(cps) != 1 {
		t.Error("no heads changed the page")
	}
}

func TestDraftsJoinThePageOfTheirName(t *testing.T) {
	p := &listPager{merge: merger{prefix: "p/"}}
	for _, name := range []string{"a", "c", "d", "e", "q", "z"} {
		p.drafts = append(p.drafts, dirent{name: name, mode: syscall.S_IFREG})
	}
	names := func(ents []dirent) []string {
		var s []string
		for _, e := range ents {
			s = append(s, e.name)
		}
		return s
	}
	page := &meta.ListResult{IsTruncated: true, Next: "p/e"}
	objs := []*meta.Version{{Key: "p/b"}, {Key: "p/c"}}
	heads := map[string]queuedHead{"p/d": {}} // a change queued: the overlay's to show
	// a: not stored yet; c: stored; d: the overlay's; e: the page's last
	// name; q and z: the next pages'.
	first := p.draftsIn(page, objs, heads)
	if got, want := names(first), []string{"a", "e"}; !slices.Equal(got, want) {
		t.Errorf("the first page adds %q, want %q", got, want)
	}
	_ = append(first, make([]dirent, 4)...) // as next does: the files of the next pages stay
	page = &meta.ListResult{IsTruncated: true, Next: "p/k/"}
	if got := p.draftsIn(page, nil, nil); len(got) != 0 {
		t.Errorf("a page with none of the files in its range adds %q", names(got))
	}
	if got, want := names(p.draftsIn(&meta.ListResult{}, nil, nil)), []string{"q", "z"}; !slices.Equal(got, want) {
		t.Errorf("the last page adds %q, want %q", got, want)
	}
}
