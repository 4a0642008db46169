package object_test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

func (f *fixture) part(u *meta.Upload, n int32, body []byte) *meta.Part {
	f.t.Helper()
	p, err := f.svc.UploadPart(f.ctx, "bkt", u.Key, u.ID, n, bytes.NewReader(body), object.PartOptions{Size: int64(len(body))})
	if err != nil {
		f.t.Fatalf("upload part %d: %v", n, err)
	}
	return p
}

func (f *fixture) upload(key string) *meta.Upload {
	f.t.Helper()
	u, err := f.svc.CreateUpload(f.ctx, "bkt", key, object.UploadOptions{Attrs: object.Attrs{Content: meta.Content{Type: "video/mp4"}, UserMeta: map[string]string{"a": "b"}}})
	if err != nil {
		f.t.Fatal(err)
	}
	return u
}

func multipartETag(parts ...*meta.Part) string {
	h := md5.New()
	for _, p := range parts {
		b, _ := hex.DecodeString(p.ETag)
		h.Write(b)
	}
	return fmt.Sprintf("%x-%d", h.Sum(nil), len(parts))
}

func completed(parts ...*meta.Part) []object.CompletedPart {
	var cs []object.CompletedPart
	for _, p := range parts {
		cs = append(cs, object.CompletedPart{Number: p.Number, ETag: p.ETag})
	}
	return cs
}

func TestMultipartJoinsPartsWithoutCopying(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	u := f.upload("movie")
	b1, b2, b3 := randBytes(object.MinPartSize), randBytes(object.MinPartSize+3), randBytes(1000)
	p3 := f.part(u, 3, b3)
	f.part(u, 2, randBytes(object.MinPartSize)) // replaced below
	p1 := f.part(u, 1, b1)
	p2 := f.part(u, 2, b2)
	f.part(u, 7, randBytes(10)) // uploaded, never listed
	before := f.chunks()

	v, err := f.svc.CompleteUpload(f.ctx, "bkt", "movie", u.ID, completed(p1, p2, p3), nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.ETag != multipartETag(p1, p2, p3) || v.Content.Type != "video/mp4" || v.UserMeta["a"] != "b" {
		t.Fatalf("completed row = %+v", v)
	}
	if got := f.mustRead("movie", ""); !bytes.Equal(got, append(append(append([]byte{}, b1...), b2...), b3...)) {
		t.Fatal("completed object reads back wrong")
	}
	// The unlisted part's chunks are the collector's to reclaim.
	if after := f.chunks(); after != before {
		t.Fatalf("complete wrote or deleted chunks: %d before, %d after", before, after)
	}
	again, err := f.svc.CompleteUpload(f.ctx, "bkt", "movie", u.ID, completed(p1, p2, p3), nil)
	if err != nil || again.ID != v.ID {
		t.Fatalf("repeated complete = %v, %v; want version %s", again, err, v.WireID())
	}
	if _, err := f.svc.UploadPart(f.ctx, "bkt", "movie", u.ID, 1, bytes.NewReader(nil), object.PartOptions{Size: 0}); !errors.Is(err, meta.ErrNoSuchUpload) {
		t.Fatalf("part after complete: %v", err)
	}
	if ups, err := f.svc.ListUploads(f.ctx, "bkt", meta.UploadListOptions{Limit: 10}); err != nil || len(ups) != 0 {
		t.Fatalf("uploads after complete: %v, %v", ups, err)
	}
}

func TestCompleteRefusesBadListsAndRecovers(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	u := f.upload("k")
	p1 := f.part(u, 1, randBytes(1000))
	p2 := f.part(u, 2, randBytes(object.MinPartSize))
	p3 := f.part(u, 3, randBytes(10))
	for _, c := range []struct {
		name  string
		parts []object.CompletedPart
		want  error
	}{
		{"empty", nil, meta.ErrInvalidPart},
		{"descending", completed(p2, p1), meta.ErrInvalidPartOrder},
		{"repeated", completed(p2, p2), meta.ErrInvalidPartOrder},
		{"wrong etag", []object.CompletedPart{{Number: 2, ETag: p1.ETag}}, meta.ErrInvalidPart},
		{"missing part", []object.CompletedPart{{Number: 4, ETag: p1.ETag}}, meta.ErrInvalidPart},
		{"small middle part", completed(p1, p2), meta.ErrEntityTooSmall},
	} {
		if _, err := f.svc.CompleteUpload(f.ctx, "bkt", "k", u.ID, c.parts, nil); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "k", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Fatalf("a refused complete made a version: %v", err)
	}
	v, err := f.svc.CompleteUpload(f.ctx, "bkt", "k", u.ID, completed(p2, p3), nil)
	if err != nil || v.Size != object.MinPartSize+10 {
		t.Fatalf("complete after refusals = %v, %v", v, err)
	}
}

func TestConcurrentCompletesMakeOneVersion(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	u := f.upload("k")
	p := f.part(u, 1, randBytes(100))
	var wg sync.WaitGroup
	ids := make([]string, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := f.svc.CompleteUpload(f.ctx, "bkt", "k", u.ID, completed(p), nil)
			if err != nil {
				t.Errorf("complete %d: %v", i, err)
				return
			}
			ids[i] = v.WireID()
		}()
	}
	wg.Wait()
	page, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{})
	if err != nil || len(page.Versions) != 1 {
		t.Fatalf("versions after racing completes: %+v, %v", page, err)
	}
	for i, id := range ids {
		if id != page.Versions[0].WireID() {
			t.Errorf("complete %d answered version %s, the bucket has %s", i, id, page.Versions[0].WireID())
		}
	}
}

func TestAbortAndCopyPart(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	src := randBytes(3 * chunk)
	f.put("src", src)
	u := f.upload("dst")
	before := f.chunks()
	p1, sv, err := f.svc.CopyPart(f.ctx, "bkt", "dst", u.ID, 1, object.CopySource{Bucket: "bkt", Key: "src", Offset: 10, Length: 2 * chunk})
	if err != nil || sv.Key != "src" {
		t.Fatal(err)
	}
	if f.chunks() != before {
		t.Fatal("copy part wrote chunks")
	}
	if _, _, err := f.svc.CopyPart(f.ctx, "bkt", "dst", u.ID, 2, object.CopySource{Bucket: "bkt", Key: "src", Offset: 3 * chunk, Length: 1}); !errors.Is(err, meta.ErrInvalidRange) {
		t.Fatalf("copy part past the end: %v", err)
	}
	v, err := f.svc.CompleteUpload(f.ctx, "bkt", "dst", u.ID, completed(p1), nil)
	if err != nil || !bytes.Equal(f.mustRead("dst", v.WireID()), src[10:10+2*chunk]) {
		t.Fatalf("completed copy reads back wrong: %v", err)
	}

	// Aborting leaves the parts' chunks to the collector: one of them
	// shares the source's chunks, which must survive.
	a := f.upload("gone")
	f.part(a, 1, randBytes(chunk+1))
	if _, _, err := f.svc.CopyPart(f.ctx, "bkt", "gone", a.ID, 2, object.CopySource{Bucket: "bkt", Key: "src", Length: -1}); err != nil {
		t.Fatal(err)
	}
	before = f.chunks()
	if err := f.svc.AbortUpload(f.ctx, "bkt", "gone", a.ID); err != nil {
		t.Fatal(err)
	}
	if after := f.chunks(); after != before {
		t.Fatalf("abort deleted chunks: %d before, %d after", before, after)
	}
	if !bytes.Equal(f.mustRead("src", ""), src) {
		t.Fatal("the source of a copied part reads back wrong after the abort")
	}
	if err := f.svc.AbortUpload(f.ctx, "bkt", "gone", a.ID); !errors.Is(err, meta.ErrNoSuchUpload) {
		t.Fatalf("second abort: %v", err)
	}
	if _, err := f.svc.Parts(f.ctx, "bkt", "gone", a.ID, 0, 10); !errors.Is(err, meta.ErrNoSuchUpload) {
		t.Fatalf("parts of an aborted upload: %v", err)
	}
}
