package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// bucketName names the bucket an env works in.
const bucketName = "storetest"

// An env is one case's store, its bucket, the model the store must agree
// with, and a fake clock for the rows it writes.
type env struct {
	t   *testing.T
	ctx context.Context
	s   meta.Store
	b   meta.Bucket
	m   *model
	now time.Time
	n   int // rows built so far, to give each distinct contents
}

// newEnv opens a fresh store and creates an empty bucket in state v.
func newEnv(t *testing.T, open Opener, v meta.Versioning) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), s: open(t), m: &model{}, now: clockStart()}
	e.b = e.createBucket(bucketName, v)
	return e
}

// with returns a copy of e that reports to t, a subtest of e's test.
func (e *env) with(t *testing.T) *env {
	c := *e
	c.t, c.ctx = t, t.Context()
	return &c
}

// clockStart returns an instant after every version id this process has
// issued, so that ids stamped by an env's clock carry exactly its times.
func clockStart() time.Time {
	last := meta.NewVersionID(time.Unix(0, 0)).Time()
	if now := time.Now(); now.After(last) {
		return now
	}
	return last
}

// tick advances the fake clock by a second and returns it.
func (e *env) tick() time.Time {
	e.now = e.now.Add(time.Second)
	return e.now
}

// createBucket creates a bucket in state v.
func (e *env) createBucket(name string, v meta.Versioning) meta.Bucket {
	e.t.Helper()
	b, err := meta.NewBucket(name, "", e.now)
	if err != nil {
		e.t.Fatal(err)
	}
	b.Versioning = v
	if err := e.s.CreateBucket(e.ctx, b); err != nil {
		e.t.Fatalf("CreateBucket(%q): %v", name, err)
	}
	return b
}

// setVersioning changes the bucket's state.
func (e *env) setVersioning(v meta.Versioning) {
	e.t.Helper()
	b, err := e.s.UpdateBucket(e.ctx, e.b.Name, func(b *meta.Bucket) error {
		b.Versioning = v
		return nil
	})
	if err != nil || b.Versioning != v {
		e.t.Fatalf("UpdateBucket(%s) = %v, %v", v, b.Versioning, err)
	}
	e.b = b
}

// row builds a new row of key with contents no other row has.
func (e *env) row(key string) *meta.Version {
	e.n++
	// The manifest makes most of the row, as a small object's inline bytes
	// do: a backend that indexes attributes only must still return it.
	// Every third one is as long as a small file's bytes, which a backend
	// may keep apart from the row.
	n := fmt.Sprint(e.n)
	reps := 20
	if e.n%3 == 0 {
		reps = 4096 / len(n)
	}
	return &meta.Version{Key: key, ID: meta.NewVersionID(e.tick()), Size: int64(e.n), ETag: fmt.Sprintf("%032x", e.n),
		Manifest: []byte(strings.Repeat(n, reps))}
}

// put writes a new row of key as PUT does.
func (e *env) put(key string) *meta.Version {
	e.t.Helper()
	v := e.row(key)
	e.mustCommit(meta.PutMutation(e.b, v))
	return v
}

// del deletes key as DELETE without a version id does and returns the
// delete marker written, if any.
func (e *env) del(key string) *meta.Version {
	e.t.Helper()
	mu, v := meta.DeleteMutation(e.b, key, "", e.tick())
	e.mustCommit(mu)
	return v
}

// delVersion removes row (key, id) as DELETE ?versionId does.
func (e *env) delVersion(key string, id meta.VersionID) {
	e.t.Helper()
	e.mustCommit(meta.Mutation{Key: key, Delete: id})
}

// commit commits ms to the store and to the model, and fails the test
// unless the store answered as the model did.
func (e *env) commit(ms ...meta.Mutation) error {
	e.t.Helper()
	want := e.m.commit(ms...)
	err := e.s.Commit(e.ctx, e.b, ms...)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		e.t.Fatalf("Commit(%s) = %v, want %v", describeMutations(ms), err, want)
	}
	return err
}

func (e *env) mustCommit(ms ...meta.Mutation) {
	e.t.Helper()
	if err := e.commit(ms...); err != nil {
		e.t.Fatalf("Commit(%s): %v", describeMutations(ms), err)
	}
}

// expectState checks every view of the bucket against the model: the
// backend's history and live scans, the engine's full listings, GET of
// each key's latest and null rows, and GET of each row by id and by its
// wire id.
func (e *env) expectState() {
	e.t.Helper()
	e.expectScan(meta.ScanOptions{}, e.m.rows)
	e.expectScan(meta.ScanOptions{Live: true}, e.m.live(meta.VersionID{}))
	e.expectVersions(meta.VersionListOptions{})
	e.expectList(meta.ListOptions{})
	for i, v := range e.m.rows {
		if i == 0 || e.m.rows[i-1].Key != v.Key {
			e.expectLatest(v.Key)
			e.expectNull(v.Key)
		}
		got, err := e.s.Get(e.ctx, e.b, v.Key, v.ID)
		e.expectRow(fmt.Sprintf("Get(%q, %s)", v.Key, v.ID), got, err, v, meta.ErrNoSuchVersion)
		got, err = meta.Lookup(e.ctx, e.s, e.b, v.Key, v.WireID())
		e.expectRow(fmt.Sprintf("Lookup(%q, %s)", v.Key, v.WireID()), got, err, v, meta.ErrNoSuchVersion)
	}
}

// expectLatest checks GET of key's latest row: the model's head, a
// delete marker included, or ErrNoSuchKey.
func (e *env) expectLatest(key string) {
	e.t.Helper()
	got, err := meta.Latest(e.ctx, e.s, e.b, key)
	e.expectRow(fmt.Sprintf("Latest(%q)", key), got, err, e.m.head(key), meta.ErrNoSuchKey)
}

// expectNull checks GetNull and Lookup "null" of key against the model.
func (e *env) expectNull(key string) {
	e.t.Helper()
	want := e.m.null(key)
	got, err := e.s.GetNull(e.ctx, e.b, key)
	e.expectRow(fmt.Sprintf("GetNull(%q)", key), got, err, want, meta.ErrNoSuchVersion)
	got, err = meta.Lookup(e.ctx, e.s, e.b, key, meta.NullVersion)
	e.expectRow(fmt.Sprintf("Lookup(%q, null)", key), got, err, want, meta.ErrNoSuchVersion)
}

// expectGone checks that row (key, id) cannot be read.
func (e *env) expectGone(key string, id meta.VersionID) {
	e.t.Helper()
	got, err := e.s.Get(e.ctx, e.b, key, id)
	e.expectRow(fmt.Sprintf("Get(%q, %s)", key, id), got, err, nil, meta.ErrNoSuchVersion)
}

// expectRow checks a single-row read: want, or the error missing when
// want is nil.
func (e *env) expectRow(call string, got *meta.Version, err error, want *meta.Version, missing error) {
	e.t.Helper()
	switch {
	case want == nil:
		if !errors.Is(err, missing) {
			e.t.Fatalf("%s = %s, %v; want %v", call, show(got), err, missing)
		}
	case err != nil:
		e.t.Fatalf("%s: %v; want %s", call, err, show(want))
	case !sameRow(got, want):
		e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, show(got), show(want))
	}
}

// expectScan checks that a Scan yields exactly want.
func (e *env) expectScan(o meta.ScanOptions, want []*meta.Version) {
	e.t.Helper()
	got, err := drain(e.s.Scan(e.ctx, e.b, o))
	if err != nil {
		e.t.Fatalf("Scan(%q, live %v): %v", o.Prefix, o.Live, err)
	}
	e.expectRows(fmt.Sprintf("Scan(%q, live %v)", o.Prefix, o.Live), got, want)
}

// expectRows checks a sequence of rows, in order and field by field.
func (e *env) expectRows(call string, got, want []*meta.Version) {
	e.t.Helper()
	if g, w := rowIDs(got), rowIDs(want); g != w {
		e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, g, w)
	}
	for i := range got {
		if !sameRow(got[i], want[i]) {
			e.t.Fatalf("%s: row %d =\n\t%s\nwant\n\t%s", call, i, show(got[i]), show(want[i]))
		}
	}
}

// expectList checks meta.List against the model and returns its page.
func (e *env) expectList(o meta.ListOptions) *meta.ListResult {
	e.t.Helper()
	res, err := meta.List(e.ctx, e.s, e.b, o)
	e.expectListPage(fmt.Sprintf("List(%s)", describeList(o)), res, err, e.m.list(meta.VersionID{}, o))
	return res
}

// expectAsOf checks meta.ListAsOf against the model.
func (e *env) expectAsOf(at time.Time, o meta.ListOptions) {
	e.t.Helper()
	res, err := meta.ListAsOf(e.ctx, e.s, e.b, at, o)
	call := fmt.Sprintf("ListAsOf(%s, %s)", at.UTC().Format(time.RFC3339Nano), describeList(o))
	e.expectListPage(call, res, err, e.m.list(meta.AsOf(at), o))
}

func (e *env) expectListPage(call string, res *meta.ListResult, err error, want page) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", call, err)
	}
	var objs []*meta.Version
	var cps []string
	next := ""
	for _, en := range want.entries {
		if en.v != nil {
			objs = append(objs, en.v)
		} else {
			cps = append(cps, en.prefix)
		}
		next = en.name()
	}
	e.expectRows(call+".Objects", res.Objects, objs)
	if !slices.Equal(res.CommonPrefixes, cps) {
		e.t.Fatalf("%s.CommonPrefixes = %q, want %q", call, res.CommonPrefixes, cps)
	}
	if res.IsTruncated != want.truncated || res.Next != next {
		e.t.Fatalf("%s: IsTruncated, Next = %v, %q; want %v, %q", call, res.IsTruncated, res.Next, want.truncated, next)
	}
}

// expectVersions checks meta.ListVersions against the model and returns
// its page.
func (e *env) expectVersions(o meta.VersionListOptions) *meta.VersionListResult {
	e.t.Helper()
	call := fmt.Sprintf("ListVersions(prefix %q delimiter %q key-marker %q version-id-marker %q max %d)",
		o.Prefix, o.Delimiter, o.KeyMarker, o.VersionIDMarker, o.MaxKeys)
	want, werr := e.m.versions(o)
	res, err := meta.ListVersions(e.ctx, e.s, e.b, o)
	switch {
	case werr != nil:
		if !errors.Is(err, werr) {
			e.t.Fatalf("%s: %v, want %v", call, err, werr)
		}
		return nil
	case err != nil:
		e.t.Fatalf("%s: %v", call, err)
	}
	var rows []*meta.Version
	var latest []bool
	var cps []string
	for _, en := range want.entries {
		if en.v != nil {
			rows = append(rows, en.v)
			latest = append(latest, en.latest)
		} else {
			cps = append(cps, en.prefix)
		}
	}
	var gotLatest []bool
	for _, v := range res.Versions {
		gotLatest = append(gotLatest, v.IsLatest)
	}
	e.expectRows(call+".Versions", versionRows(res), rows)
	if !slices.Equal(gotLatest, latest) {
		e.t.Fatalf("%s: IsLatest = %v, want %v", call, gotLatest, latest)
	}
	if !slices.Equal(res.CommonPrefixes, cps) {
		e.t.Fatalf("%s.CommonPrefixes = %q, want %q", call, res.CommonPrefixes, cps)
	}
	var key, id string
	if n := len(want.entries); want.truncated {
		last := want.entries[n-1]
		key = last.name()
		if last.v != nil {
			id = last.v.WireID()
		}
	}
	if res.IsTruncated != want.truncated || res.NextKeyMarker != key || res.NextVersionIDMarker != id {
		e.t.Fatalf("%s: IsTruncated, NextKeyMarker, NextVersionIDMarker = %v, %q, %q; want %v, %q, %q",
			call, res.IsTruncated, res.NextKeyMarker, res.NextVersionIDMarker, want.truncated, key, id)
	}
	return res
}

// versionRows returns the rows of a versions page.
func versionRows(res *meta.VersionListResult) []*meta.Version {
	out := make([]*meta.Version, len(res.Versions))
	for i, v := range res.Versions {
		out[i] = v.Version
	}
	return out
}

// drain reads an iterator to its end and closes it.
func drain(it meta.Iter) ([]*meta.Version, error) {
	var out []*meta.Version
	for it.Next() {
		out = append(out, it.Version())
	}
	err := it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return out, err
}

// norm makes rows comparable with reflect.DeepEqual: empty and nil maps
// and manifests are the same, and so are equal instants in any location.
func norm(v *meta.Version) meta.Version {
	c := *v
	if len(c.UserMeta) == 0 {
		c.UserMeta = nil
	}
	if len(c.Checksums) == 0 {
		c.Checksums = nil
	}
	if len(c.Manifest) == 0 {
		c.Manifest = nil
	}
	if c.POSIX != nil {
		p := *c.POSIX
		p.Mtime = p.Mtime.UTC()
		c.POSIX = &p
	}
	return c
}

// sameRow reports whether two rows are equal in every field.
func sameRow(a, b *meta.Version) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// show formats every field of a row.
func show(v *meta.Version) string {
	if v == nil {
		return "<nil>"
	}
	c := norm(v)
	p := c.POSIX
	c.POSIX = nil
	return fmt.Sprintf("%+v POSIX:%+v", c, p)
}

// rowIDs names rows compactly: key@wire-id, with a mark on delete markers.
func rowIDs(vs []*meta.Version) string {
	var b strings.Builder
	for i, v := range vs {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%q@%s", v.Key, v.WireID())
		if v.DeleteMarker {
			b.WriteString("(marker)")
		}
	}
	return "[" + b.String() + "]"
}

func describeList(o meta.ListOptions) string {
	return fmt.Sprintf("prefix %q delimiter %q after %q max %d", o.Prefix, o.Delimiter, o.After, o.MaxKeys)
}

func describeMutations(ms []meta.Mutation) string {
	var parts []string
	for _, m := range ms {
		s := fmt.Sprintf("{Key:%q", m.Key)
		if m.Check != nil {
			s += " Check"
		}
		if m.DropNull {
			s += " DropNull"
		}
		if !m.Delete.IsZero() {
			s += " Delete:" + m.Delete.String()
		}
		if m.Put != nil {
			s += " Put:" + rowIDs([]*meta.Version{m.Put})
		}
		if m.CompleteUpload != "" {
			s += " CompleteUpload:" + m.CompleteUpload
		}
		parts = append(parts, s+"}")
	}
	return strings.Join(parts, ", ")
}
