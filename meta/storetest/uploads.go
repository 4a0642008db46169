package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// newUpload builds an upload of key in state Uploading whose template
// carries attributes of every kind.
func (e *env) newUpload(key string) *meta.Upload {
	now := e.tick()
	e.n++
	return &meta.Upload{
		Key:       key,
		ID:        meta.NewUploadID(now),
		Initiated: now,
		Template: &meta.Version{
			Key:          key,
			Content:      meta.Content{Type: "text/plain", CacheControl: "no-cache"},
			UserMeta:     map[string]string{"n": fmt.Sprint(e.n)},
			POSIX:        &meta.POSIX{Mode: 0o100644, UID: 1, Mtime: now},
			StorageClass: "STANDARD_IA",
			Owner:        "AKIAOWNER",
		},
	}
}

// createUpload creates a new upload of key in the store and the model.
func (e *env) createUpload(key string) *meta.Upload {
	e.t.Helper()
	u := e.newUpload(key)
	if err := e.s.CreateUpload(e.ctx, e.b, u); err != nil {
		e.t.Fatalf("CreateUpload(%q): %v", key, err)
	}
	e.m.createUpload(u)
	return u
}

// createUploads creates an upload of each key.
func (e *env) createUploads(keys ...string) []*meta.Upload {
	e.t.Helper()
	us := make([]*meta.Upload, len(keys))
	for i, k := range keys {
		us[i] = e.createUpload(k)
	}
	return us
}

// newPart builds part n with contents no other part has.
func (e *env) newPart(n int32) *meta.Part {
	e.n++
	return &meta.Part{
		Number:    n,
		Size:      int64(e.n),
		ETag:      fmt.Sprintf("%032x", e.n),
		Modified:  e.tick(),
		Checksums: map[string]string{"CRC32": fmt.Sprintf("%08x", e.n)},
		Manifest:  []byte(fmt.Sprint(e.n)),
	}
}

// putPart uploads a new part n of u to the store and the model, and fails
// the test unless the store answered as the model did.
func (e *env) putPart(u *meta.Upload, n int32) error {
	e.t.Helper()
	p := e.newPart(n)
	want := e.m.putPart(u.Key, u.ID, p)
	err := e.s.PutPart(e.ctx, e.b, u.Key, u.ID, p)
	if want == nil && err != nil || want != nil && !errors.Is(err, want) {
		e.t.Fatalf("PutPart(%s, %d) = %v, want %v", uploadName(u), n, err, want)
	}
	return err
}

// updateUpload runs UpdateUpload on the store and the model, and fails
// the test unless both answer alike.
func (e *env) updateUpload(u *meta.Upload, fn func(*meta.Upload) error) error {
	e.t.Helper()
	want, werr := e.m.updateUpload(u.Key, u.ID, fn)
	got, err := e.s.UpdateUpload(e.ctx, e.b, u.Key, u.ID, fn)
	switch {
	case werr != nil:
		if !errors.Is(err, werr) {
			e.t.Fatalf("UpdateUpload(%s) = %s, %v; want %v", uploadName(u), showUpload(got), err, werr)
		}
	case err != nil:
		e.t.Fatalf("UpdateUpload(%s): %v; want %s", uploadName(u), err, showUpload(want))
	case !sameUpload(got, want):
		e.t.Fatalf("UpdateUpload(%s) =\n\t%s\nwant\n\t%s", uploadName(u), showUpload(got), showUpload(want))
	}
	return err
}

// completing moves u to Completing as Complete does, fixing the id and
// ETag of the row it will write, and returns that row.
func (e *env) completing(u *meta.Upload) *meta.Version {
	e.t.Helper()
	v := e.row(u.Key)
	v.ETag += "-2"
	if err := e.updateUpload(u, func(c *meta.Upload) error {
		c.State, c.Version, c.ETag = meta.Completing, v.ID, v.ETag
		return nil
	}); err != nil {
		e.t.Fatal(err)
	}
	return v
}

// completion is the mutation that completes u by writing v.
func (e *env) completion(u *meta.Upload, v *meta.Version) meta.Mutation {
	m := meta.PutMutation(e.b, v)
	m.CompleteUpload = u.ID
	return m
}

// expectUploads checks every view of the uploads against the model: each
// upload and its parts, and the listings with and without completed ones.
func (e *env) expectUploads() {
	e.t.Helper()
	for _, mu := range e.m.uploads {
		e.expectUpload(mu.u.Key, mu.u.ID)
	}
	for _, completed := range []bool{false, true} {
		e.expectListUploads(meta.UploadListOptions{Limit: len(e.m.uploads) + 1, Completed: completed})
	}
}

// expectUpload checks Upload and Parts of (key, id) against the model:
// the upload and all its parts, or ErrNoSuchUpload from both.
func (e *env) expectUpload(key, id string) {
	e.t.Helper()
	got, err := e.s.Upload(e.ctx, e.b, key, id)
	call := fmt.Sprintf("Upload(%q, %s)", key, id)
	switch mu := e.m.upload(key, id); {
	case mu == nil:
		if !errors.Is(err, meta.ErrNoSuchUpload) {
			e.t.Fatalf("%s = %s, %v; want ErrNoSuchUpload", call, showUpload(got), err)
		}
	case err != nil:
		e.t.Fatalf("%s: %v; want %s", call, err, showUpload(mu.u))
	case !sameUpload(got, mu.u):
		e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, showUpload(got), showUpload(mu.u))
	}
	e.expectParts(key, id, 0, meta.MaxParts)
}

// expectParts checks a page of Parts against the model.
func (e *env) expectParts(key, id string, after int32, limit int) []*meta.Part {
	e.t.Helper()
	call := fmt.Sprintf("Parts(%q, %s, after %d, limit %d)", key, id, after, limit)
	want, werr := e.m.partsAfter(key, id, after, limit)
	got, err := e.s.Parts(e.ctx, e.b, key, id, after, limit)
	switch {
	case werr != nil:
		if !errors.Is(err, werr) {
			e.t.Fatalf("%s = %s, %v; want %v", call, showParts(got), err, werr)
		}
	case err != nil:
		e.t.Fatalf("%s: %v", call, err)
	case len(got) != len(want):
		e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, showParts(got), showParts(want))
	}
	for i := range got {
		if !reflect.DeepEqual(normPart(got[i]), normPart(want[i])) {
			e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, showParts(got), showParts(want))
		}
	}
	return got
}

// expectListUploads checks a page of ListUploads against the model.
func (e *env) expectListUploads(o meta.UploadListOptions) []*meta.Upload {
	e.t.Helper()
	call := fmt.Sprintf("ListUploads(%+v)", o)
	got, err := e.s.ListUploads(e.ctx, e.b, o)
	if err != nil {
		e.t.Fatalf("%s: %v", call, err)
	}
	want := e.m.listUploads(o)
	if g, w := uploadNames(got), uploadNames(want); g != w {
		e.t.Fatalf("%s =\n\t%s\nwant\n\t%s", call, g, w)
	}
	for i := range got {
		if !sameUpload(got[i], want[i]) {
			e.t.Fatalf("%s: upload %d =\n\t%s\nwant\n\t%s", call, i, showUpload(got[i]), showUpload(want[i]))
		}
	}
	return got
}

// normUpload makes uploads comparable with reflect.DeepEqual, as norm
// does rows.
func normUpload(u *meta.Upload) meta.Upload {
	c := *u
	c.Initiated = c.Initiated.UTC()
	if c.Template != nil {
		t := norm(c.Template)
		c.Template = &t
	}
	return c
}

func sameUpload(a, b *meta.Upload) bool {
	if a == nil || b == nil {
		return a == b
	}
	return reflect.DeepEqual(normUpload(a), normUpload(b))
}

// showUpload formats every field of an upload.
func showUpload(u *meta.Upload) string {
	if u == nil {
		return "<nil>"
	}
	c := normUpload(u)
	return fmt.Sprintf("{Key:%q ID:%s Initiated:%v State:%d Version:%s ETag:%s Template:%s}",
		c.Key, c.ID, c.Initiated, c.State, c.Version, c.ETag, show(c.Template))
}

// uploadName names an upload compactly: key@id, with its state.
func uploadName(u *meta.Upload) string {
	return fmt.Sprintf("%q@%s(state %d)", u.Key, u.ID, u.State)
}

func uploadNames(us []*meta.Upload) string {
	names := make([]string, len(us))
	for i, u := range us {
		names[i] = uploadName(u)
	}
	return "[" + strings.Join(names, " ") + "]"
}

// normPart makes parts comparable with reflect.DeepEqual.
func normPart(p *meta.Part) meta.Part {
	c := *p
	c.Modified = c.Modified.UTC()
	if len(c.Checksums) == 0 {
		c.Checksums = nil
	}
	if len(c.Manifest) == 0 {
		c.Manifest = nil
	}
	return c
}

func showParts(ps []*meta.Part) string {
	var b strings.Builder
	for _, p := range ps {
		fmt.Fprintf(&b, "\n\t\t%+v", normPart(p))
	}
	return "[" + b.String() + "]"
}

func testUploadsCreate(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	a1 := e.createUpload("a")
	b1 := e.createUpload("b/c")
	a2 := e.createUpload("a")
	bare := &meta.Upload{Key: "bare", ID: meta.NewUploadID(e.tick())} // no template, no time
	if err := e.s.CreateUpload(e.ctx, e.b, bare); err != nil {
		t.Fatalf("CreateUpload(%s): %v", uploadName(bare), err)
	}
	e.m.createUpload(bare)
	e.expectUploads()

	// An id in use is refused and the upload under it left alone.
	dup := e.newUpload("a")
	dup.ID = a1.ID
	if err := e.s.CreateUpload(e.ctx, e.b, dup); err == nil {
		t.Fatalf("CreateUpload of an id in use succeeded")
	}
	for _, c := range []struct {
		name string
		edit func(*meta.Upload)
		want error
	}{
		{"invalid key", func(u *meta.Upload) { u.Key, u.Template.Key = "k\xff", "k\xff" }, meta.ErrInvalidKey},
		{"malformed id", func(u *meta.Upload) { u.ID = "upload-1" }, meta.ErrInvalidArgument},
		{"not uploading", func(u *meta.Upload) { u.State, u.Version = meta.Completing, meta.NewVersionID(e.tick()) }, meta.ErrInvalidArgument},
	} {
		u := e.newUpload("k")
		c.edit(u)
		if err := e.s.CreateUpload(e.ctx, e.b, u); !errors.Is(err, c.want) {
			t.Fatalf("CreateUpload with %s: %v, want %v", c.name, err, c.want)
		}
	}
	e.expectUploads()

	// Ids of no upload: fresh, another key's, malformed. Invalid keys.
	for _, id := range []string{meta.NewUploadID(e.tick()), b1.ID, "upload-1", "", strings.ToUpper(a2.ID)[1:]} {
		e.expectUpload("a", id)
	}
	for _, key := range []string{"", "a\xff"} {
		if _, err := e.s.Upload(e.ctx, e.b, key, a1.ID); !errors.Is(err, meta.ErrInvalidKey) {
			t.Fatalf("Upload(%q): %v, want ErrInvalidKey", key, err)
		}
	}

	// Uploads belong to their bucket: another one, or a deleted one,
	// shows none of them and takes no new ones.
	first, firstModel := e.b, e.m
	e.b, e.m = e.createBucket("storetest-2", meta.Enabled), &model{}
	e.expectUpload(a1.Key, a1.ID)
	e.expectUploads()
	second := e.b
	if err := e.s.DeleteBucket(e.ctx, second.Name); err != nil {
		t.Fatal(err)
	}
	if err := e.s.CreateUpload(e.ctx, second, e.newUpload("k")); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("CreateUpload in a deleted bucket: %v, want ErrNoSuchBucket", err)
	}
	e.createBucket(second.Name, meta.Enabled)
	if err := e.s.CreateUpload(e.ctx, second, e.newUpload("k")); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("CreateUpload in a deleted bucket whose name was taken again: %v, want ErrNoSuchBucket", err)
	}
	e.b, e.m = first, firstModel
	e.expectUploads()
}

func testUploadsUpdate(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	u := e.createUpload("k")
	other := e.createUpload("k")
	refuse := errors.New("refused")
	id := meta.NewVersionID(e.tick())
	for _, fn := range []func(*meta.Upload) error{
		func(c *meta.Upload) error { c.State, c.Version = meta.Completing, id; return refuse },
		func(c *meta.Upload) error { c.ID = other.ID; return nil },
		func(c *meta.Upload) error { c.Key = "kk"; return nil },
		func(c *meta.Upload) error { c.State = meta.Completing; return nil }, // without a version id
	} {
		e.updateUpload(u, fn)
		e.expectUploads()
	}
	missing := &meta.Upload{Key: "k", ID: meta.NewUploadID(e.tick())}
	e.updateUpload(missing, func(*meta.Upload) error { return nil })
	e.updateUpload(u, func(c *meta.Upload) error {
		c.Template.UserMeta["edited"] = "yes"
		c.Template.Content.Type = "image/png"
		return nil
	})
	e.completing(u)
	e.expectUploads()
	// Back to Uploading, as a Complete that gave up would.
	e.updateUpload(u, func(c *meta.Upload) error {
		c.State, c.Version, c.ETag = meta.Uploading, meta.VersionID{}, ""
		return nil
	})
	e.expectUploads()
}

func testUploadsParts(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	u := e.createUpload("k")
	// Neighbours whose parts must stay apart: another upload of k, and
	// uploads of keys that k's bytes start.
	for _, n := range e.createUploads("k", "k", "k\x00", "kk") {
		e.putPart(n, 1)
		e.putPart(n, 2)
	}
	for _, n := range []int32{3, 1, meta.MaxParts, 2, 10, 9999} {
		e.putPart(u, n)
	}
	e.putPart(u, 2) // replaces part 2
	e.putPart(u, meta.MaxParts)
	for _, n := range []int32{0, -1, meta.MaxParts + 1} {
		e.putPart(u, n) // the model expects ErrInvalidArgument
	}
	e.expectUploads()

	// Every page size from every position, and pages followed to the end.
	parts := e.m.upload(u.Key, u.ID).parts
	for limit := 1; limit <= len(parts)+1; limit++ {
		for _, after := range []int32{-1, 0, 1, 2, 4, 9, 10, 9998, 9999, meta.MaxParts, meta.MaxParts + 1} {
			e.expectParts(u.Key, u.ID, after, limit)
		}
		n := 0
		for after := int32(0); ; n++ {
			page := e.expectParts(u.Key, u.ID, after, limit)
			if len(page) == 0 || n > len(parts) {
				break
			}
			after = page[len(page)-1].Number
		}
		if want := (len(parts) + limit - 1) / limit; n != want {
			t.Fatalf("paging parts %d at a time took %d pages, want %d", limit, n, want)
		}
	}

	// No upload, no parts.
	missing := e.newUpload("k")
	e.putPart(missing, 1)
	e.expectUpload(missing.Key, missing.ID)
	if err := e.s.PutPart(e.ctx, e.b, "k", "upload-1", e.newPart(1)); !errors.Is(err, meta.ErrNoSuchUpload) {
		t.Fatalf("PutPart to a malformed upload id: %v, want ErrNoSuchUpload", err)
	}
	if err := e.s.PutPart(e.ctx, e.b, "", u.ID, e.newPart(1)); !errors.Is(err, meta.ErrInvalidKey) {
		t.Fatalf("PutPart to an empty key: %v, want ErrInvalidKey", err)
	}
	e.expectUploads()

	// Once Complete chose the parts, no part can be added or replaced.
	e.completing(u)
	e.putPart(u, 1)
	e.putPart(u, 4)
	e.expectUploads()
}

func testUploadsComplete(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	e.put("k")
	e.put("j")
	u := e.createUpload("k")
	other := e.createUpload("k")
	for _, x := range []*meta.Upload{u, other} {
		e.putPart(x, 1)
		e.putPart(x, 2)
	}

	// Only a Completing upload completes.
	early := e.row("k")
	e.commit(e.completion(u, early))
	e.commit(e.completion(&meta.Upload{Key: "k", ID: meta.NewUploadID(e.tick())}, e.row("k")))
	e.commit(e.completion(&meta.Upload{Key: "k", ID: "upload-1"}, e.row("k")))
	e.expectState()
	e.expectUploads()

	v := e.completing(u)
	e.completing(other)
	// All or none: a failing Check, a failing mutation beside it, or the
	// upload named under another key leave the upload Completing, its
	// parts in place and no row.
	refuse := errors.New("precondition failed")
	m := e.completion(u, v)
	m.Check = func(*meta.Version) error { return refuse }
	e.commit(m)
	e.commit(e.completion(u, v), meta.Mutation{Key: "j", Delete: meta.NewVersionID(e.tick())})
	e.commit(meta.PutMutation(e.b, e.row("j")), meta.Mutation{Key: "kk", CompleteUpload: u.ID})
	e.expectState()
	e.expectUploads()

	e.mustCommit(e.completion(u, v))
	e.expectState()
	e.expectUploads() // u Completed without parts, other still Completing with its parts

	// A second Complete finds the upload Completed.
	e.commit(e.completion(u, e.row("k")))
	e.expectState()
	e.expectUploads()
}

func testUploadsList(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	keys := []string{"a", "a/b", "a/b", "a/c", "a\x00", "ab", "b", "b", "b", "日本/x"}
	us := e.createUploads(keys...)
	// Some complete, some stop at Completing.
	for _, i := range []int{1, 6, 9} {
		e.mustCommit(e.completion(us[i], e.completing(us[i])))
	}
	e.completing(us[7])
	// The same keys in another bucket must not show.
	first, firstModel := e.b, e.m
	e.b, e.m = e.createBucket("storetest-2", meta.Enabled), &model{}
	e.createUploads(keys...)
	e.b, e.m = first, firstModel
	e.expectUploads()

	type after struct{ key, id string }
	afters := []after{{}, {"a0", ""}, {"zz", ""}, {"", us[0].ID}}
	for _, u := range us {
		afters = append(afters, after{u.Key, ""}, after{u.Key, u.ID}, after{u.Key, u.ID[:31]}, after{u.Key + "\x00", ""})
	}
	for _, prefix := range []string{"", "a", "a/", "a/b", "b", "c", "日本/"} {
		for _, completed := range []bool{false, true} {
			for _, a := range afters {
				for _, limit := range []int{1, 2, 3, len(us) + 1} {
					e.expectListUploads(meta.UploadListOptions{Prefix: prefix, AfterKey: a.key, AfterID: a.id, Limit: limit, Completed: completed})
				}
			}
			// Pages followed to the end.
			for limit := 1; limit <= 3; limit++ {
				o := meta.UploadListOptions{Prefix: prefix, Limit: limit, Completed: completed}
				for n := 0; n <= len(us); n++ {
					page := e.expectListUploads(o)
					if len(page) < limit {
						break
					}
					o.AfterKey, o.AfterID = page[len(page)-1].Key, page[len(page)-1].ID
				}
			}
		}
	}
}

func testUploadsDelete(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	us := e.createUploads("k", "k", "kk")
	for _, u := range us {
		e.putPart(u, 1)
		e.putPart(u, 7)
	}
	del := func(u *meta.Upload) {
		t.Helper()
		want := e.m.deleteUpload(u.Key, u.ID)
		if err := e.s.DeleteUpload(e.ctx, e.b, u.Key, u.ID); want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("DeleteUpload(%s) = %v, want %v", uploadName(u), err, want)
		}
		e.expectUpload(u.Key, u.ID)
		e.expectUploads()
	}
	del(us[0])
	del(us[0]) // ErrNoSuchUpload
	del(&meta.Upload{Key: "k", ID: "upload-1"})

	// An upload created again under the same id starts without parts.
	again := *us[0]
	if err := e.s.CreateUpload(e.ctx, e.b, &again); err != nil {
		t.Fatal(err)
	}
	e.m.createUpload(&again)
	e.expectUploads()

	// Completed and Completing uploads go too (the collector, an abort
	// racing a Complete).
	e.mustCommit(e.completion(us[1], e.completing(us[1])))
	e.completing(us[2])
	del(us[1])
	del(us[2])
}

func testBucketsDeleteUploads(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	refused := func(step string) {
		t.Helper()
		if err := e.s.DeleteBucket(e.ctx, e.b.Name); !errors.Is(err, meta.ErrBucketNotEmpty) {
			t.Fatalf("DeleteBucket with %s: %v, want ErrBucketNotEmpty", step, err)
		}
		e.expectBuckets(e.b)
		e.expectUploads()
	}
	deleted := func() {
		t.Helper()
		if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
			t.Fatalf("DeleteBucket: %v", err)
		}
		e.expectNoBucket(e.b.Name)
		e.b, e.m = e.createBucket(e.b.Name, meta.Enabled), &model{}
		e.expectUploads() // none of the old bucket's
	}
	u := e.createUpload("k")
	e.putPart(u, 1)
	refused("an upload in progress")
	v := e.completing(u)
	refused("a completing upload")
	e.mustCommit(e.completion(u, v))
	refused("a completed upload's object")
	// A completed upload is no longer in progress: with its object gone,
	// its record goes with the bucket.
	e.delVersion("k", v.ID)
	deleted()

	u = e.createUpload("k")
	e.putPart(u, 1)
	refused("an upload in progress")
	if err := e.s.DeleteUpload(e.ctx, e.b, u.Key, u.ID); err != nil {
		t.Fatal(err)
	}
	e.m.deleteUpload(u.Key, u.ID)
	deleted()
}
