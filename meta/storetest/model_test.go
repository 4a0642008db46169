package storetest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// The model is the oracle of every case: these tests pin it to answers
// worked out by hand from the S3 documentation.

// modelFixture returns a model and its rows by label (the row's ETag):
// a: a2 a1; a/b: marker over ab1; a/c: ac1; b: null n1; c: marker only.
func modelFixture(t *testing.T) (*model, map[string]*meta.Version) {
	m := &model{}
	rows := map[string]*meta.Version{}
	now := clockStart()
	add := func(key, label string, null, marker bool) {
		now = now.Add(time.Second)
		v := &meta.Version{Key: key, ID: meta.NewVersionID(now), ETag: label, Null: null, DeleteMarker: marker}
		rows[label] = v
		if err := m.commit(meta.Mutation{Key: key, Put: v}); err != nil {
			t.Fatal(err)
		}
	}
	add("a", "a1", false, false)
	add("a/b", "ab1", false, false)
	add("a", "a2", false, false)
	add("a/c", "ac1", false, false)
	add("b", "n1", true, false)
	add("a/b", "abm", false, true)
	add("c", "cm", false, true)
	return m, rows
}

// format names a page's entries: rows by label, IsLatest marked with *,
// then "+" if truncated.
func format(p page) string {
	var parts []string
	for _, e := range p.entries {
		switch {
		case e.v == nil:
			parts = append(parts, e.prefix)
		case e.latest:
			parts = append(parts, e.v.ETag+"*")
		default:
			parts = append(parts, e.v.ETag)
		}
	}
	if p.truncated {
		parts = append(parts, "+")
	}
	return strings.Join(parts, " ")
}

func TestModelList(t *testing.T) {
	m, rows := modelFixture(t)
	for _, c := range []struct {
		o    meta.ListOptions
		want string
	}{
		{meta.ListOptions{}, "a2* ac1* n1*"},
		{meta.ListOptions{Delimiter: "/"}, "a2* a/ n1*"},
		{meta.ListOptions{Delimiter: "/", MaxKeys: 2}, "a2* a/ +"},
		{meta.ListOptions{Delimiter: "/", After: "a/"}, "n1*"},
		{meta.ListOptions{Delimiter: "/", After: "a/b"}, "n1*"},
		{meta.ListOptions{Delimiter: "/", After: "a"}, "a/ n1*"},
		{meta.ListOptions{Prefix: "a/", Delimiter: "/"}, "ac1*"},
		{meta.ListOptions{Prefix: "a", Delimiter: "/c"}, "a2* a/c"},
		{meta.ListOptions{After: "a/c", MaxKeys: 1}, "n1*"},
		{meta.ListOptions{After: "b"}, ""},
	} {
		if got := format(m.list(meta.VersionID{}, c.o)); got != c.want {
			t.Errorf("list(%s) = %q, want %q", describeList(c.o), got, c.want)
		}
	}
	// As of the instant a1 and ab1 were written, a/b was live; at n1's,
	// a2 had replaced a1 and a/b was not yet deleted.
	for label, want := range map[string]string{"a1": "a1*", "ab1": "a1* ab1*", "n1": "a2* ab1* ac1* n1*"} {
		at := rows[label].ID.Time()
		if got := format(m.list(meta.AsOf(at), meta.ListOptions{})); got != want {
			t.Errorf("list as of %s = %q, want %q", label, got, want)
		}
		if got := format(m.list(meta.AsOf(at.Add(-time.Nanosecond)), meta.ListOptions{})); got == want {
			t.Errorf("list just before %s = %q, the same as at it", label, got)
		}
	}
}

func TestModelVersions(t *testing.T) {
	m, rows := modelFixture(t)
	for _, c := range []struct {
		o    meta.VersionListOptions
		want string
	}{
		{meta.VersionListOptions{}, "a2* a1 abm* ab1 ac1* n1* cm*"},
		{meta.VersionListOptions{Delimiter: "/"}, "a2* a1 a/ n1* cm*"},
		{meta.VersionListOptions{MaxKeys: 3}, "a2* a1 abm* +"},
		{meta.VersionListOptions{KeyMarker: "a"}, "abm* ab1 ac1* n1* cm*"},
		{meta.VersionListOptions{KeyMarker: "a", VersionIDMarker: rows["a2"].ID.String()}, "a1 abm* ab1 ac1* n1* cm*"},
		{meta.VersionListOptions{KeyMarker: "a/b", VersionIDMarker: rows["abm"].ID.String(), MaxKeys: 1}, "ab1 +"},
		{meta.VersionListOptions{KeyMarker: "b", VersionIDMarker: "null"}, "cm*"},
		{meta.VersionListOptions{KeyMarker: "a/b", Delimiter: "/"}, "n1* cm*"},
		{meta.VersionListOptions{Prefix: "a/", KeyMarker: "a"}, "abm* ab1 ac1*"},
	} {
		p, err := m.versions(c.o)
		if got := format(p); err != nil || got != c.want {
			t.Errorf("versions(%+v) = %q, %v; want %q", c.o, got, err, c.want)
		}
	}
	if _, err := m.versions(meta.VersionListOptions{VersionIDMarker: "null"}); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Errorf("versions with only a version-id-marker: %v, want ErrInvalidArgument", err)
	}
}

func TestModelCommit(t *testing.T) {
	m, rows := modelFixture(t)
	before := format(page{entries: entries(m.rows, "", "")})
	refuse := errors.New("refused")
	put := &meta.Version{Key: "b", ID: meta.NewVersionID(clockStart()), ETag: "n2", Null: true}
	for _, c := range []struct {
		ms   []meta.Mutation
		want error
	}{
		{[]meta.Mutation{{Key: "a", Delete: rows["n1"].ID}}, meta.ErrNoSuchVersion},
		{[]meta.Mutation{{Key: "b", DropNull: true, Put: put}, {Key: "a", Check: func(*meta.Version) error { return refuse }}}, refuse},
		{[]meta.Mutation{{Key: "b\xff", Put: &meta.Version{Key: "b\xff"}}}, meta.ErrInvalidKey},
	} {
		if err := m.commit(c.ms...); err != c.want {
			t.Errorf("commit(%s) = %v, want %v", describeMutations(c.ms), err, c.want)
		}
		if after := format(page{entries: entries(m.rows, "", "")}); after != before {
			t.Errorf("a failed commit changed %q into %q", before, after)
		}
	}
	var head *meta.Version
	check := func(h *meta.Version) error { head = h; return nil }
	if err := m.commit(meta.Mutation{Key: "b", DropNull: true, Put: put, Check: check}, meta.Mutation{Key: "a/b", Delete: rows["abm"].ID}); err != nil {
		t.Fatal(err)
	}
	if !sameRow(head, attrsOnly(rows["n1"])) {
		t.Errorf("Check saw %s, want n1's attributes", show(head))
	}
	if got, want := format(page{entries: entries(m.rows, "", "")}), "a2* a1 ab1* ac1* n2* cm*"; got != want {
		t.Errorf("after replacing the null row and removing a marker: %q, want %q", got, want)
	}
}

func TestModelUploads(t *testing.T) {
	id := func(n int) string { return fmt.Sprintf("%032x", n) }
	m := &model{}
	for _, u := range []*meta.Upload{
		{Key: "b", ID: id(1)},
		{Key: "a", ID: id(2)},
		{Key: "a/b", ID: id(1)},
		{Key: "a", ID: id(1)},
	} {
		m.createUpload(u)
	}
	for _, n := range []int32{3, 1, 2, 1} {
		if err := m.putPart("a", id(1), &meta.Part{Number: n, Size: int64(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.putPart("a", id(1), &meta.Part{Number: 0}); err != meta.ErrInvalidArgument {
		t.Errorf("part 0: %v, want ErrInvalidArgument", err)
	}
	ps, err := m.partsAfter("a", id(1), 1, 5)
	if err != nil || len(ps) != 2 || ps[0].Number != 2 || ps[1].Number != 3 {
		t.Errorf("parts after 1 = %s, %v; want parts 2 and 3", showParts(ps), err)
	}
	version := meta.NewVersionID(clockStart())
	for _, key := range []string{"a/b", "b"} {
		if _, err := m.updateUpload(key, id(1), func(u *meta.Upload) error {
			u.State, u.Version = meta.Completing, version
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.putPart("b", id(1), &meta.Part{Number: 1}); err != meta.ErrNoSuchUpload {
		t.Errorf("part of a completing upload: %v, want ErrNoSuchUpload", err)
	}
	if err := m.commit(meta.Mutation{Key: "a/b", CompleteUpload: id(1)}); err != nil {
		t.Fatal(err)
	}
	if err := m.commit(meta.Mutation{Key: "a", CompleteUpload: id(1)}); err != meta.ErrNoSuchUpload {
		t.Errorf("completing an upload in Uploading: %v, want ErrNoSuchUpload", err)
	}

	short := func(us []*meta.Upload) string {
		var parts []string
		for _, u := range us {
			parts = append(parts, fmt.Sprintf("%s@%s", u.Key, strings.TrimLeft(u.ID, "0")))
		}
		return strings.Join(parts, " ")
	}
	for _, c := range []struct {
		o    meta.UploadListOptions
		want string
	}{
		{meta.UploadListOptions{Limit: 9}, "a@1 a@2 b@1"},
		{meta.UploadListOptions{Limit: 9, Completed: true}, "a@1 a@2 a/b@1 b@1"},
		{meta.UploadListOptions{Limit: 2, Completed: true}, "a@1 a@2"},
		{meta.UploadListOptions{AfterKey: "a", Limit: 9}, "b@1"},
		{meta.UploadListOptions{AfterKey: "a", AfterID: id(1), Limit: 9}, "a@2 b@1"},
		{meta.UploadListOptions{AfterKey: "a/b", AfterID: id(0), Limit: 9, Completed: true}, "a/b@1 b@1"},
		{meta.UploadListOptions{AfterID: id(1), Limit: 9}, "a@1 a@2 b@1"},
		{meta.UploadListOptions{Prefix: "a", Limit: 1}, "a@1"},
		{meta.UploadListOptions{Prefix: "a/", Limit: 9}, ""},
	} {
		if got := short(m.listUploads(c.o)); got != c.want {
			t.Errorf("listUploads(%+v) = %q, want %q", c.o, got, c.want)
		}
	}
	if ps, err := m.partsAfter("a/b", id(1), 0, 9); err != nil || len(ps) != 0 {
		t.Errorf("parts of a completed upload = %s, %v; want none", showParts(ps), err)
	}
}
