package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// commitAll commits each mutation from its own goroutine, all at once,
// the last first, and fails the test on any error.
func (e *env) commitAll(ms []meta.Mutation) {
	e.t.Helper()
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i := len(ms) - 1; i >= 0; i-- {
		wg.Go(func() { errs[i] = e.s.Commit(e.ctx, e.b, ms[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatalf("concurrent Commit: %v", err)
	}
}

func testConcurrentPuts(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	e.put("j")
	const n = 50
	ms := make([]meta.Mutation, n)
	for i := range ms {
		ms[i] = meta.PutMutation(e.b, e.row("k"))
	}
	e.commitAll(ms)
	for _, m := range ms {
		e.m.commit(m)
	}
	newest := ms[n-1].Put
	res, err := meta.ListVersions(e.ctx, e.s, e.b, meta.VersionListOptions{Prefix: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var latest []*meta.Version
	for _, v := range res.Versions {
		if v.IsLatest {
			latest = append(latest, v.Version)
		}
	}
	if len(res.Versions) != n || len(latest) != 1 || latest[0].ID != newest.ID {
		t.Fatalf("after %d concurrent PUTs: %d versions, latest %s; want %d, latest %s",
			n, len(res.Versions), rowIDs(latest), n, rowIDs([]*meta.Version{newest}))
	}
	e.expectLatest("k")
	e.expectState()
}

// testConcurrentNull races PUTs and DELETEs of one key in a suspended
// bucket: each replaces the null row, so exactly one null row survives,
// beside the untouched versioned one.
func testConcurrentNull(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	e.put("k")
	e.setVersioning(meta.Suspended)
	const n = 20
	ms := make([]meta.Mutation, n)
	for i := range ms {
		if i%2 == 0 {
			ms[i] = meta.PutMutation(e.b, e.row("k"))
		} else {
			ms[i], _ = meta.DeleteMutation(e.b, "k", "", e.tick())
		}
	}
	e.commitAll(ms)
	null, err := e.s.GetNull(e.ctx, e.b, "k")
	if err != nil {
		t.Fatalf("GetNull after concurrent null writes: %v", err)
	}
	for _, m := range ms {
		if m.Put.ID == null.ID {
			e.m.commit(m)
		}
	}
	e.expectState()
}

// testConcurrentReadWrite runs writers on disjoint keys beside listers
// that page through the bucket, checking what every page can promise
// while rows come and go; then the result against the model.
func testConcurrentReadWrite(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	const writers, listers, ops = 4, 3, 24
	logs := make([][]meta.Mutation, writers)
	var wg sync.WaitGroup
	for w := range logs {
		wg.Go(func() {
			for j := range ops {
				key := fmt.Sprintf("w%d/%d", w, j%7)
				m := meta.PutMutation(e.b, &meta.Version{Key: key, ID: meta.NewVersionID(time.Now()), ETag: fmt.Sprintf("%032x", j)})
				if j%3 == 2 {
					m, _ = meta.DeleteMutation(e.b, key, "", time.Now())
				}
				if err := e.s.Commit(e.ctx, e.b, m); err != nil {
					t.Errorf("Commit(%s): %v", describeMutations([]meta.Mutation{m}), err)
					return
				}
				logs[w] = append(logs[w], m)
			}
		})
	}
	done := make(chan struct{})
	var lw sync.WaitGroup
	for range listers {
		lw.Go(func() {
			for {
				if err := e.checkPages(); err != nil {
					t.Error(err)
					return
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
	}
	wg.Wait()
	close(done)
	lw.Wait()
	if t.Failed() {
		return
	}
	for _, log := range logs {
		for _, m := range log {
			e.m.commit(m)
		}
	}
	e.expectState()
}

// checkPages pages through the bucket's listings and checks what holds
// whatever writers do meanwhile: pages in order without repeats, no page
// above its size, IsLatest on exactly the first row of each key.
func (e *env) checkPages() error {
	o := meta.ListOptions{MaxKeys: 3}
	for last := ""; ; {
		res, err := meta.List(e.ctx, e.s, e.b, o)
		if err != nil {
			return err
		}
		if len(res.Objects) > o.MaxKeys {
			return fmt.Errorf("List(%s): %d objects", describeList(o), len(res.Objects))
		}
		for _, v := range res.Objects {
			if v.Key <= last || v.DeleteMarker {
				return fmt.Errorf("List(%s): %s after %q", describeList(o), rowIDs([]*meta.Version{v}), last)
			}
			last = v.Key
		}
		if !res.IsTruncated {
			break
		}
		o.After = res.Next
	}
	vo := meta.VersionListOptions{MaxKeys: 4}
	var last *meta.Version
	for {
		res, err := meta.ListVersions(e.ctx, e.s, e.b, vo)
		if err != nil {
			return err
		}
		if len(res.Versions) > vo.MaxKeys {
			return fmt.Errorf("ListVersions: %d versions in a page of %d", len(res.Versions), vo.MaxKeys)
		}
		for _, v := range res.Versions {
			newKey := last == nil || v.Key != last.Key
			if !newKey && v.ID.Compare(last.ID) <= 0 || last != nil && v.Key < last.Key || v.IsLatest != newKey {
				return fmt.Errorf("ListVersions: %s (latest %v) after %s", rowIDs([]*meta.Version{v.Version}), v.IsLatest, rowIDs([]*meta.Version{last}))
			}
			last = v.Version
		}
		if !res.IsTruncated {
			break
		}
		vo.KeyMarker, vo.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
	res, err := meta.List(e.ctx, e.s, e.b, meta.ListOptions{Delimiter: "/"})
	if err != nil {
		return err
	}
	for i, p := range res.CommonPrefixes {
		if len(p) != 3 || !strings.HasPrefix(p, "w") || i > 0 && p <= res.CommonPrefixes[i-1] {
			return fmt.Errorf("List(delimiter /): common prefixes %q", res.CommonPrefixes)
		}
	}
	if _, err := meta.Latest(e.ctx, e.s, e.b, "w0/0"); err != nil && !errors.Is(err, meta.ErrNoSuchKey) {
		return err
	}
	return nil
}

// testConcurrentComplete races Completes of one upload: moving it from
// Uploading to Completing is a compare-and-set that exactly one wins.
func testConcurrentComplete(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	u := e.createUpload("k")
	e.putPart(u, 1)
	const n = 20
	lost := errors.New("not uploading")
	rows := make([]*meta.Version, n)
	fns := make([]func(*meta.Upload) error, n)
	for i := range rows {
		rows[i] = e.row("k")
		fns[i] = func(c *meta.Upload) error {
			if c.State != meta.Uploading {
				return lost
			}
			c.State, c.Version, c.ETag = meta.Completing, rows[i].ID, rows[i].ETag
			return nil
		}
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range fns {
		wg.Go(func() { _, errs[i] = e.s.UpdateUpload(e.ctx, e.b, u.Key, u.ID, fns[i]) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("Completes %d and %d both moved the upload to Completing", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, lost):
			t.Fatalf("a losing Complete: %v, want its fn's error", err)
		}
	}
	if won < 0 {
		t.Fatal("no Complete moved the upload to Completing")
	}
	if _, err := e.m.updateUpload(u.Key, u.ID, fns[won]); err != nil {
		t.Fatal(err)
	}
	e.expectUploads()
	e.mustCommit(e.completion(u, rows[won]))
	e.commit(e.completion(u, rows[(won+1)%n])) // a loser that went on: ErrNoSuchUpload
	e.expectState()
	e.expectUploads()
}

// testConcurrentParts uploads parts while the upload moves to Completing:
// each PutPart either lands before the move, and its part is among the
// parts Complete sees, or fails with ErrNoSuchUpload and leaves nothing.
func testConcurrentParts(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	u := e.createUpload("k")
	const n = 40
	parts := make([]*meta.Part, n)
	for i := range parts {
		parts[i] = e.newPart(int32(i + 1))
	}
	v := e.row("k")
	complete := func(c *meta.Upload) error {
		c.State, c.Version = meta.Completing, v.ID
		return nil
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range parts {
		if i == n/2 {
			wg.Go(func() {
				if _, err := e.s.UpdateUpload(e.ctx, e.b, u.Key, u.ID, complete); err != nil {
					t.Errorf("UpdateUpload: %v", err)
				}
			})
		}
		wg.Go(func() { errs[i] = e.s.PutPart(e.ctx, e.b, u.Key, u.ID, parts[i]) })
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for i, err := range errs {
		switch {
		case err == nil:
			e.m.putPart(u.Key, u.ID, parts[i])
		case !errors.Is(err, meta.ErrNoSuchUpload):
			t.Fatalf("PutPart(%d) racing Complete: %v, want nil or ErrNoSuchUpload", i+1, err)
		}
	}
	if _, err := e.m.updateUpload(u.Key, u.ID, complete); err != nil {
		t.Fatal(err)
	}
	e.expectUploads()
}
