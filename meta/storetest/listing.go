package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// pagingFixture returns an Enabled bucket whose keys have one to three
// rows, with a null row at the head, in the middle and alone, delete
// markers on top of keys and alone, and a directory.
func pagingFixture(t *testing.T, open Opener) *env {
	e := newEnv(t, open, meta.Enabled)
	for range 3 {
		e.put("a")
	}
	e.put("b")
	e.del("b")
	e.put("c")
	e.setVersioning(meta.Suspended)
	e.put("c")
	e.put("e")
	e.del("f")
	e.setVersioning(meta.Enabled)
	e.put("c")
	e.put("d/1")
	e.put("d/2")
	e.del("d/3")
	e.put("g")
	e.put("g")
	return e
}

// names lists a page's keys and common prefixes, sorted, rows named
// key@wire-id.
func names(objs []*meta.Version, cps []string, withIDs bool) []string {
	out := slices.Clone(cps)
	for _, v := range objs {
		n := v.Key
		if withIDs {
			n += "@" + v.WireID()
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func entryNames(es []entry, withIDs bool) []string {
	var objs []*meta.Version
	var cps []string
	for _, e := range es {
		if e.v != nil {
			objs = append(objs, e.v)
		} else {
			cps = append(cps, e.prefix)
		}
	}
	return names(objs, cps, withIDs)
}

// expectPaging checks the outcome of paging through a listing with
// MaxKeys size: every entry of want met exactly once, in as few pages as
// size allows.
func (e *env) expectPaging(call string, got []string, pages int, want []entry, size int, withIDs bool) {
	e.t.Helper()
	slices.Sort(got)
	w := entryNames(want, withIDs)
	if n := max(1, (len(want)+pageSize(size)-1)/pageSize(size)); !slices.Equal(got, w) || pages != n {
		e.t.Fatalf("%s max %d paged through %q in %d pages, want %q in %d", call, size, got, pages, w, n)
	}
}

// expectListPaging pages through meta.List from the start of o, checking
// each page against the model, and then the whole.
func (e *env) expectListPaging(o meta.ListOptions) {
	e.t.Helper()
	want := entries(e.m.live(meta.VersionID{}), o.Prefix, o.Delimiter)
	var got []string
	n := 1
	for ; ; n++ {
		res := e.expectList(o)
		got = append(got, names(res.Objects, res.CommonPrefixes, false)...)
		if !res.IsTruncated || n > len(want) {
			break
		}
		o.After = res.Next
	}
	e.expectPaging(fmt.Sprintf("List(prefix %q delimiter %q)", o.Prefix, o.Delimiter), got, n, want, o.MaxKeys, false)
}

// expectVersionPaging is expectListPaging for meta.ListVersions.
func (e *env) expectVersionPaging(o meta.VersionListOptions) {
	e.t.Helper()
	want := entries(e.m.rows, o.Prefix, o.Delimiter)
	var got []string
	n := 1
	for ; ; n++ {
		res := e.expectVersions(o)
		got = append(got, names(versionRows(res), res.CommonPrefixes, true)...)
		if !res.IsTruncated || n > len(want) {
			break
		}
		o.KeyMarker, o.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
	e.expectPaging(fmt.Sprintf("ListVersions(prefix %q delimiter %q)", o.Prefix, o.Delimiter), got, n, want, o.MaxKeys, true)
}

// testPaging pages through both listings with every page size from 1 to
// one more than there are entries, so that pages end on every entry: on
// each row of a key, each common prefix, before and after null rows.
func testPaging(e *env) {
	for _, delim := range []string{"", "/"} {
		for size := 1; size <= len(entries(e.m.live(meta.VersionID{}), "", delim))+1; size++ {
			e.expectListPaging(meta.ListOptions{Delimiter: delim, MaxKeys: size})
		}
		for size := 1; size <= len(entries(e.m.rows, "", delim))+1; size++ {
			e.expectVersionPaging(meta.VersionListOptions{Delimiter: delim, MaxKeys: size})
		}
	}
}

// testLarge has more rows than a page holds and than a backend reads at
// once, written in a few large commits: 1100 live keys, a key with 300
// versions and 200 deleted keys.
func testLarge(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	var ms []meta.Mutation
	for i := range 1100 {
		ms = append(ms, meta.PutMutation(e.b, e.row(fmt.Sprintf("many/%04d", i))))
	}
	for range 300 {
		ms = append(ms, meta.PutMutation(e.b, e.row("deep")))
	}
	for i := range 200 {
		k := fmt.Sprintf("gone/%03d", i)
		m, _ := meta.DeleteMutation(e.b, k, "", e.tick())
		ms = append(ms, meta.PutMutation(e.b, e.row(k)), m)
	}
	for c := range slices.Chunk(ms, 250) {
		e.mustCommit(c...)
	}
	e.expectState()
	for _, size := range []int{999, 1000, 1001, 5000} {
		e.expectList(meta.ListOptions{MaxKeys: size})
		e.expectVersions(meta.VersionListOptions{MaxKeys: size})
	}
	for _, o := range []meta.ListOptions{{}, {MaxKeys: 129}, {Prefix: "many/", MaxKeys: 333}, {Delimiter: "/", MaxKeys: 1}} {
		e.expectListPaging(o)
	}
	for _, o := range []meta.VersionListOptions{{}, {MaxKeys: 128}, {MaxKeys: 129}, {Prefix: "deep", MaxKeys: 7}, {Delimiter: "/", MaxKeys: 2}} {
		e.expectVersionPaging(o)
	}
	deep := e.m.key("deep")
	for _, v := range []*meta.Version{deep[0], deep[150], deep[299]} {
		e.expectAsOf(v.ID.Time(), meta.ListOptions{})
		e.expectAsOf(v.ID.Time(), meta.ListOptions{Prefix: "deep"})
		e.expectVersions(meta.VersionListOptions{KeyMarker: "deep", VersionIDMarker: v.ID.String()})
	}
}

func testVersionMarkers(e *env) {
	a, c := e.m.key("a"), e.m.key("c") // c is versioned, null, versioned
	for _, m := range []struct {
		o      meta.VersionListOptions
		first  *meta.Version
		latest bool
	}{
		{meta.VersionListOptions{KeyMarker: "a"}, e.m.head("b"), true},
		{meta.VersionListOptions{KeyMarker: "a", VersionIDMarker: a[0].ID.String()}, a[1], false},
		{meta.VersionListOptions{KeyMarker: "a", VersionIDMarker: a[2].ID.String()}, e.m.head("b"), true},
		{meta.VersionListOptions{KeyMarker: "c", VersionIDMarker: c[0].ID.String()}, c[1], false},
		{meta.VersionListOptions{KeyMarker: "c", VersionIDMarker: meta.NullVersion}, c[2], false},
		{meta.VersionListOptions{KeyMarker: "e", VersionIDMarker: meta.NullVersion}, e.m.head("f"), true},
		{meta.VersionListOptions{KeyMarker: "d/", Delimiter: "/"}, e.m.head("e"), true},
		{meta.VersionListOptions{KeyMarker: "d/2", Delimiter: "/"}, e.m.head("e"), true},
		{meta.VersionListOptions{KeyMarker: "d/2"}, e.m.head("d/3"), true},
		{meta.VersionListOptions{KeyMarker: "b", VersionIDMarker: "null"}, e.m.head("c"), true},
	} {
		res := e.expectVersions(m.o)
		if len(res.Versions) == 0 || res.Versions[0].ID != m.first.ID || res.Versions[0].IsLatest != m.latest {
			e.t.Fatalf("ListVersions(key-marker %q version-id-marker %q delimiter %q) = %s, want it to start with %s latest %v",
				m.o.KeyMarker, m.o.VersionIDMarker, m.o.Delimiter, rowIDs(versionRows(res)), rowIDs([]*meta.Version{m.first}), m.latest)
		}
	}
	_, err := meta.ListVersions(e.ctx, e.s, e.b, meta.VersionListOptions{VersionIDMarker: a[0].ID.String()})
	if !errors.Is(err, meta.ErrInvalidArgument) {
		e.t.Fatalf("ListVersions with a version-id-marker and no key-marker: %v, want ErrInvalidArgument", err)
	}
}

// testRemovedMarker removes the row a page ended on before the next page
// is asked for: ids are totally ordered, so the page still starts right
// after where that row was, and no older row of its key is lost.
func testRemovedMarker(e *env) {
	res := e.expectVersions(meta.VersionListOptions{MaxKeys: 1})
	first := res.Versions[0].Version
	e.delVersion(first.Key, first.ID)
	e.expectVersions(meta.VersionListOptions{KeyMarker: res.NextKeyMarker, VersionIDMarker: res.NextVersionIDMarker})
}

// trickyKeys sort in surprising ways around delimiters and prefixes: keys
// that are prefixes of others, the delimiter at the start and end, NUL
// and U+00FF (whose UTF-8 starts with a byte above '/'), the longest keys,
// multibyte runes and multi-byte delimiters.
var trickyKeys = []string{
	"a", "a/", "a/b", "a/b/c", "a//b", "a\x00", "a\x00b", "a\x01", "a\u00ff", "ab",
	"a/" + strings.Repeat("x", meta.MaxKeyLen-2), strings.Repeat("é", meta.MaxKeyLen/2),
	"日本/語", "日本/x/y", "日本語", "m::n::o", "m::p", "z\U0010ffff",
}

// trickyFixture writes trickyKeys, plus keys that are deleted, re-created
// and overwritten, and a null row on top of a versioned one.
func trickyFixture(t *testing.T, open Opener) *env {
	e := newEnv(t, open, meta.Enabled)
	for _, k := range trickyKeys {
		e.put(k)
	}
	for _, k := range []string{"a/b/dead", "b/dead", "日本/dead/x", "a/x"} {
		e.put(k)
		e.del(k)
	}
	e.put("a/x")
	e.put("a/b/c")
	e.put("a/b/c")
	e.setVersioning(meta.Suspended)
	e.put("ab")
	return e
}

var (
	trickyPrefixes   = []string{"", "a", "a/", "a/b", "a/b/", "a\x00", "日本", "日本/", "m::", "é", "q"}
	trickyDelimiters = []string{"", "/", "//", "b", "\x00", "語", "::", "/b"}
	trickyMarkers    = []string{"", "a", "a/", "a/b", "a/b/", "a/b/c", "a/b/z", "a\x00", "a0", "b", "日本/", "日本/語", "m::n", "é", "z\U0010ffff"}
)

func testDelimiters(e *env) {
	for _, p := range trickyPrefixes {
		for _, d := range trickyDelimiters {
			for _, after := range trickyMarkers {
				for _, size := range []int{1, 2, 0} {
					e.expectList(meta.ListOptions{Prefix: p, Delimiter: d, After: after, MaxKeys: size})
				}
			}
		}
	}
}

func testDelimitersVersions(e *env) {
	markers := []meta.VersionListOptions{{}}
	for _, k := range trickyMarkers {
		markers = append(markers, meta.VersionListOptions{KeyMarker: k})
	}
	for _, k := range []string{"a/b/c", "ab"} {
		for _, v := range e.m.key(k) {
			markers = append(markers, meta.VersionListOptions{KeyMarker: k, VersionIDMarker: v.WireID()})
		}
	}
	for _, p := range trickyPrefixes {
		for _, d := range trickyDelimiters {
			for _, o := range markers {
				for _, size := range []int{1, 3, 0} {
					o.Prefix, o.Delimiter, o.MaxKeys = p, d, size
					e.expectVersions(o)
				}
			}
		}
	}
}

func testDeletedPrefix(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	for _, k := range []string{"dir/x", "dir/sub/y", "part/a"} {
		e.put(k)
		e.del(k)
	}
	for _, k := range []string{"dir2/z", "part/b", "top"} {
		e.put(k)
	}
	for _, c := range []struct {
		prefix                  string
		objects, prefixes       string
		versions, versionPrefix string
	}{
		{"", "top", "dir2/ part/", "top", "dir/ dir2/ part/"},
		{"dir/", "", "", "dir/x dir/x", "dir/sub/"},
		{"part/", "part/b", "", "part/a part/a part/b", ""},
	} {
		o := meta.ListOptions{Prefix: c.prefix, Delimiter: "/"}
		res := e.expectList(o)
		var keys []string
		for _, v := range res.Objects {
			keys = append(keys, v.Key)
		}
		if !slices.Equal(keys, strings.Fields(c.objects)) || !slices.Equal(res.CommonPrefixes, strings.Fields(c.prefixes)) {
			t.Fatalf("List(%s) = %q, %q; want %q, %q", describeList(o), keys, res.CommonPrefixes, c.objects, c.prefixes)
		}
		vres := e.expectVersions(meta.VersionListOptions{Prefix: c.prefix, Delimiter: "/"})
		keys = nil
		for _, v := range vres.Versions {
			keys = append(keys, v.Key)
		}
		if !slices.Equal(keys, strings.Fields(c.versions)) || !slices.Equal(vres.CommonPrefixes, strings.Fields(c.versionPrefix)) {
			t.Fatalf("ListVersions(prefix %q, /) = %q, %q; want %q, %q", c.prefix, keys, vres.CommonPrefixes, c.versions, c.versionPrefix)
		}
	}
	// Deleted keys take no room in a page.
	e.expectList(meta.ListOptions{MaxKeys: 1})
}

func testAsOf(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	var writes []time.Time
	run := func(ops ...func()) {
		for _, op := range ops {
			op()
			writes = append(writes, e.now)
		}
	}
	putting := func(k string) func() { return func() { e.put(k) } }
	deleting := func(k string) func() { return func() { e.del(k) } }
	run(putting("a"), putting("b/1"), putting("b/2"), deleting("a"), putting("c"), putting("a"),
		deleting("b/1"), putting("b/1"), deleting("c"), putting("b/3"), deleting("b/2"), putting("a"),
		deleting("b/3"))
	opts := []meta.ListOptions{
		{},
		{Delimiter: "/"},
		{Prefix: "b/"},
		{Delimiter: "/", MaxKeys: 1},
		{After: "a", MaxKeys: 2},
		{After: "b/", Delimiter: "/"},
	}
	check := func() {
		t.Helper()
		instants := []time.Time{writes[0].Add(-time.Hour), e.now.Add(time.Hour)}
		for _, w := range writes {
			instants = append(instants, w.Add(-time.Nanosecond), w, w.Add(time.Second/2))
		}
		for _, at := range instants {
			for _, o := range opts {
				e.expectAsOf(at, o)
			}
		}
	}
	check()

	// The view at an instant is of the rows that remain: removing rows and
	// replacing null rows rewrites the past.
	a, b1 := e.m.key("a"), e.m.key("b/1")
	e.delVersion("a", a[len(a)-1].ID)
	e.delVersion("b/1", b1[1].ID)
	e.setVersioning(meta.Suspended)
	run(putting("c"), putting("c"), deleting("b/1"), putting("d"))
	check()
}
