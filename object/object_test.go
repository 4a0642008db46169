package object_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

const chunk = 64 << 10 // small chunks so multi-chunk objects stay small

type fixture struct {
	t    *testing.T
	ctx  context.Context
	svc  *object.Service
	data *local.Store
}

func newFixture(t *testing.T, versioning meta.Versioning) *fixture {
	t.Helper()
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	f := &fixture{t: t, ctx: context.Background(), svc: object.New(m, d, object.Options{ChunkSize: chunk}), data: d}
	if _, err := f.svc.CreateBucket(f.ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if versioning != meta.Unversioned {
		if _, err := f.svc.SetVersioning(f.ctx, "bkt", versioning); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) put(key string, body []byte) *meta.Version {
	f.t.Helper()
	v, err := f.svc.Put(f.ctx, "bkt", key, bytes.NewReader(body), object.PutOptions{Size: int64(len(body))})
	if err != nil {
		f.t.Fatalf("put %s: %v", key, err)
	}
	return v
}

// read returns the bytes a GET serves, or the error.
func (f *fixture) read(key, version string, off, n int64) ([]byte, error) {
	obj, err := f.svc.Get(f.ctx, "bkt", key, version, off, n)
	if err != nil {
		return nil, err
	}
	defer obj.Body.Close()
	return io.ReadAll(obj.Body)
}

func (f *fixture) mustRead(key, version string) []byte {
	f.t.Helper()
	b, err := f.read(key, version, 0, -1)
	if err != nil {
		f.t.Fatalf("get %s?versionId=%s: %v", key, version, err)
	}
	return b
}

// chunks counts the chunk files in the store.
func (f *fixture) chunks() int {
	f.t.Helper()
	n := 0
	if err := f.data.Walk(f.ctx, func(data.ChunkID, int64, time.Time) error { n++; return nil }); err != nil {
		f.t.Fatal(err)
	}
	return n
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.IntN(256))
	}
	return b
}

func TestPutGetRoundTripsAndRanges(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	for _, n := range []int{0, 1, 4096, 4097, chunk - 1, chunk, chunk + 1, 3*chunk + 17} {
		body := randBytes(n)
		key := fmt.Sprintf("obj-%d", n)
		v := f.put(key, body)
		if v.Size != int64(n) || v.ETag != fmt.Sprintf("%x", md5.Sum(body)) {
			t.Fatalf("%s: size %d etag %s", key, v.Size, v.ETag)
		}
		if got := f.mustRead(key, ""); !bytes.Equal(got, body) {
			t.Fatalf("%s: read back %d bytes differ", key, len(got))
		}
		for i := 0; i < 5 && n > 0; i++ {
			off := rand.Int64N(int64(n))
			ln := rand.Int64N(int64(n)-off) + 1
			got, err := f.read(key, v.WireID(), off, ln)
			if err != nil || !bytes.Equal(got, body[off:off+ln]) {
				t.Fatalf("%s bytes %d+%d: %v", key, off, ln, err)
			}
		}
		if _, err := f.read(key, "", int64(n)+1, -1); !errors.Is(err, meta.ErrInvalidRange) {
			t.Fatalf("%s: range past the end: %v, want ErrInvalidRange", key, err)
		}
	}
}

func TestDeleteMarkersAcrossTheCore(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v1 := f.put("k", []byte("one"))
	f.put("k", []byte("two"))
	res, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{})
	if err != nil || !res.DeleteMarker || res.VersionID == "" {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	head, err := f.svc.Head(f.ctx, "bkt", "k", "")
	if !errors.Is(err, meta.ErrNoSuchKey) || head == nil || head.WireID() != res.VersionID {
		t.Fatalf("head of deleted key = %v, %v; want the marker and ErrNoSuchKey", head, err)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "k", res.VersionID); !errors.Is(err, meta.ErrDeleteMarker) {
		t.Fatalf("head of the marker by id = %v, want ErrDeleteMarker", err)
	}
	if got := f.mustRead("k", v1.WireID()); string(got) != "one" {
		t.Fatalf("old version reads %q", got)
	}
	// Deleting the marker un-deletes the key.
	if _, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{VersionID: res.VersionID}); err != nil {
		t.Fatal(err)
	}
	if got := f.mustRead("k", ""); string(got) != "two" {
		t.Fatalf("after undelete the key reads %q, want two", got)
	}
}

func TestUnversionedPutReplacesAndDeleteRemoves(t *testing.T) {
	f := newFixture(t, meta.Unversioned)
	f.put("k", []byte("one"))
	v2 := f.put("k", []byte("two"))
	if !v2.Null {
		t.Fatal("a version in an unversioned bucket is not the null version")
	}
	page, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{})
	if err != nil || len(page.Versions) != 1 || string(f.mustRead("k", "null")) != "two" {
		t.Fatalf("versions after two puts: %+v, %v", page, err)
	}
	res, err := f.svc.Delete(f.ctx, "bkt", "k", object.DeleteOptions{})
	if err != nil || res.DeleteMarker {
		t.Fatalf("delete = %+v, %v", res, err)
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "k", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Fatalf("head after delete: %v", err)
	}
	if err := f.svc.DeleteBucket(f.ctx, "bkt"); err != nil {
		t.Fatalf("bucket not empty after deleting its only object: %v", err)
	}
}

func TestCopyAndRenameShareChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(2*chunk + 5)
	src := f.put("src", body)
	before := f.chunks()

	repl := &object.Attrs{Content: meta.Content{Type: "text/plain"}, UserMeta: map[string]string{"color": "red"}}
	cp, err := f.svc.Copy(f.ctx, "bkt", "src", "bkt", "copy", object.CopyOptions{SrcVersionID: src.WireID(), Replace: repl})
	if err != nil {
		t.Fatal(err)
	}
	if cp.ETag != src.ETag || cp.Content.Type != "text/plain" || cp.UserMeta["color"] != "red" || cp.ID == src.ID {
		t.Fatalf("copy row = %+v", cp)
	}
	mv, err := f.svc.Rename(f.ctx, "bkt", "copy", "moved", "")
	if err != nil {
		t.Fatal(err)
	}
	if mv.UserMeta["color"] != "red" {
		t.Fatalf("rename dropped metadata: %+v", mv.UserMeta)
	}
	if got := f.chunks(); got != before {
		t.Fatalf("copy and rename wrote chunks: %d before, %d after", before, got)
	}
	if got := f.mustRead("moved", ""); !bytes.Equal(got, body) {
		t.Fatal("renamed object reads back different bytes")
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "copy", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Fatalf("rename source still visible: %v", err)
	}
	if _, err := f.svc.Rename(f.ctx, "bkt", "nope", "x", ""); !meta.IsNotFound(err) {
		t.Fatalf("rename of a missing key: %v", err)
	}
}

func TestBadInputChangesNothing(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	f.put("keep", []byte("kept"))
	chunksBefore := f.chunks()
	big := randBytes(2 * chunk)
	cases := []struct {
		name   string
		bucket string
		key    string
		o      object.PutOptions
		want   error
	}{
		{"no such bucket", "nope", "k", object.PutOptions{Size: -1}, meta.ErrNoSuchBucket},
		{"empty key", "bkt", "", object.PutOptions{Size: -1}, meta.ErrInvalidKey},
		{"key too long", "bkt", string(randLetters(1025)), object.PutOptions{Size: -1}, meta.ErrInvalidKey},
		{"key not utf-8", "bkt", "a\xffb", object.PutOptions{Size: -1}, meta.ErrInvalidKey},
		{"bad digest", "bkt", "k", object.PutOptions{Size: -1, MD5: make([]byte, 16)}, meta.ErrBadDigest},
		{"an MD5 to check with CRC32C", "bkt", "k", object.PutOptions{Size: -1, MD5: make([]byte, 16), CRC32C: true}, meta.ErrInvalidArgument},
		{"short body", "bkt", "k", object.PutOptions{Size: int64(len(big)) + 1}, meta.ErrIncompleteBody},
		{"failed check", "bkt", "keep", object.PutOptions{Size: -1, Check: func(*meta.Version) error { return meta.ErrPreconditionFailed }}, meta.ErrPreconditionFailed},
	}
	for _, c := range cases {
		_, err := f.svc.Put(f.ctx, c.bucket, c.key, bytes.NewReader(big), c.o)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := f.svc.Head(f.ctx, "bkt", "k", ""); !errors.Is(err, meta.ErrNoSuchKey) {
		t.Errorf("a failed put left key k: %v", err)
	}
	if got := f.mustRead("keep", ""); string(got) != "kept" {
		t.Errorf("a failed put changed keep: %q", got)
	}
	if got := f.chunks(); got != chunksBefore {
		t.Errorf("failed puts left %d chunks behind", got-chunksBefore)
	}
	for _, id := range []string{"xyz", "0123456789abcdef0123456789abcdef"} {
		if _, err := f.read("keep", id, 0, -1); err == nil {
			t.Errorf("get with version %q succeeded", id)
		}
	}
}

func TestCorruptManifestIsAClearError(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v := f.put("k", randBytes(chunk+1))
	v.Manifest = []byte{0xff, 0xff, 0xff}
	if _, _, err := f.svc.Open(f.ctx, v, 0, -1); !errors.Is(err, data.ErrCorrupt) {
		t.Fatalf("open with a corrupt manifest: %v, want data.ErrCorrupt", err)
	}
}

func randLetters(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(rand.IntN(26))
	}
	return b
}

func TestWatchSeesEveryCommittedKey(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	var got []object.Change
	cancel := f.svc.Watch(func(c object.Change) { got = append(got, c) })
	f.put("a", []byte("x"))
	if _, err := f.svc.Rename(f.ctx, "bkt", "a", "b", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Delete(f.ctx, "bkt", "b", object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A failed commit notifies nobody.
	f.svc.Put(f.ctx, "bkt", "c", bytes.NewReader(nil), object.PutOptions{Size: 1})
	cancel()
	f.put("d", nil)
	want := []object.Change{{"bkt", "a"}, {"bkt", "b"}, {"bkt", "a"}, {"bkt", "b"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
}

func TestPutManifestSharesChunks(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(3 * chunk)
	v := f.put("big", body)
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	before := f.chunks()
	edited, err := data.Overwrite(f.ctx, f.data, m, chunk+10, 1, bytes.NewReader([]byte{'!'}), data.WriteOptions{ChunkSize: chunk})
	if err != nil {
		t.Fatal(err)
	}
	nv, err := f.svc.PutManifest(f.ctx, "bkt", "big", edited, "edited-1", object.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body[chunk+10] = '!'
	if got := f.mustRead("big", ""); !bytes.Equal(got, body) || nv.ETag != "edited-1" {
		t.Fatal("edited version reads back wrong")
	}
	if n := f.chunks() - before; n != 1 {
		t.Fatalf("a 1-byte edit wrote %d chunks, want 1", n)
	}
}

func TestFinishCompletesOrRefusesTheRow(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	v, err := f.svc.Put(f.ctx, "bkt", "k", bytes.NewReader([]byte("body")), object.PutOptions{Size: -1,
		Finish: func(v *meta.Version) error {
			v.Checksums = map[string]string{"CRC32": "trailer"}
			return nil
		}})
	if err != nil || v.Checksums["CRC32"] != "trailer" {
		t.Fatalf("put with Finish = %+v, %v", v, err)
	}
	before := f.chunks()
	refused := errors.New("trailer mismatch")
	_, err = f.svc.Put(f.ctx, "bkt", "k", bytes.NewReader(randBytes(2*chunk)), object.PutOptions{Size: -1,
		Finish: func(*meta.Version) error { return refused }})
	if !errors.Is(err, refused) {
		t.Fatalf("put refused by Finish: %v", err)
	}
	if head, _ := f.svc.Head(f.ctx, "bkt", "k", ""); head.ID != v.ID || f.chunks() != before {
		t.Fatal("a put refused by Finish changed the bucket or left chunks")
	}
}

// TestPutCRC32C: a body hashed with CRC-32C gets it as its one checksum
// and an opaque ETag, which differs for different bytes of one size.
func TestPutCRC32C(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	for _, size := range []int{5, 2*chunk + 1} {
		a, b := randBytes(size), randBytes(size)
		etags := map[string]bool{}
		for _, body := range [][]byte{a, b} {
			v, err := f.svc.Put(f.ctx, "bkt", "k", bytes.NewReader(body), object.PutOptions{Size: int64(size), CRC32C: true,
				Attrs: object.Attrs{Checksums: map[string]string{"SHA1": "of another body"}}})
			if err != nil {
				t.Fatal(err)
			}
			sum := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli))))
			if len(v.Checksums) != 1 || v.Checksums["CRC32C"] != sum || !strings.HasSuffix(v.ETag, "-0") {
				t.Errorf("%d bytes: checksums %v, ETag %s; want CRC32C %s only and an opaque ETag", size, v.Checksums, v.ETag, sum)
			}
			if got := f.mustRead("k", ""); !bytes.Equal(got, body) {
				t.Errorf("%d bytes read back wrong", size)
			}
			etags[v.ETag] = true
		}
		if len(etags) != 2 {
			t.Errorf("%d bytes: two bodies got one ETag", size)
		}
	}
}

func TestAccessKeys(t *testing.T) {
	f := newFixture(t, meta.Unversioned)
	k := object.NewAccessKey("alice", false)
	if len(k.ID) != 20 || len(k.Secret) != 40 || k.ID == object.NewAccessKey("", false).ID {
		t.Fatalf("new key = %+v", k)
	}
	stored, err := f.svc.CreateAccessKey(f.ctx, k)
	if err != nil || stored.Created.IsZero() {
		t.Fatalf("create = %+v, %v", stored, err)
	}
	if _, err := f.svc.CreateAccessKey(f.ctx, k); !errors.Is(err, meta.ErrAccessKeyExists) {
		t.Fatalf("duplicate create: %v", err)
	}
	got, err := f.svc.AccessKey(f.ctx, k.ID)
	if err != nil || got.Secret != k.Secret || got.Name != "alice" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if err := f.svc.DeleteAccessKey(f.ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if ks, err := f.svc.ListAccessKeys(f.ctx); err != nil || len(ks) != 0 {
		t.Fatalf("keys after delete: %v, %v", ks, err)
	}
}

// TestListedAttrsCannotBeRead: a version listed for its attributes only
// carries no manifest. Reading it or editing it is refused, and writes
// nothing. (Sharing its bytes works: TestShareListed.)
func TestListedAttrsCannotBeRead(t *testing.T) {
	f := newFixture(t, meta.Enabled)
	body := randBytes(3*chunk + 5)
	f.put("big", body)
	f.put("small", []byte("inline"))
	res, err := f.svc.List(f.ctx, "bkt", meta.ListOptions{Attrs: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 2 {
		t.Fatalf("listed %d objects, want 2", len(res.Objects))
	}
	for _, v := range res.Objects {
		if !v.NoManifest || v.Manifest != nil || v.Size == 0 {
			t.Fatalf("%s listed with attributes only: NoManifest %v, %d manifest bytes, size %d", v.Key, v.NoManifest, len(v.Manifest), v.Size)
		}
		refused := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, meta.ErrInvalidArgument) {
				t.Errorf("%s of listed %s: %v, want ErrInvalidArgument", op, v.Key, err)
			}
		}
		_, err := f.svc.ReaderAt(f.ctx, v)
		refused("ReaderAt", err)
		_, _, err = f.svc.Open(f.ctx, v, 0, -1)
		refused("Open", err)
		_, err = f.svc.Edit(f.ctx, "bkt", v.Key, v, object.EditOptions{Size: 1, Dirty: []object.Extent{{Off: 0, Len: 1}}, Src: bytes.NewReader([]byte("x"))})
		refused("Edit", err)
	}
	// Whole reads a listed version again, by its id.
	for _, v := range res.Objects {
		w, err := f.svc.Whole(f.ctx, "bkt", v)
		if err != nil {
			t.Fatalf("Whole(%s): %v", v.Key, err)
		}
		r, err := f.svc.ReaderAt(f.ctx, w)
		if err != nil {
			t.Fatalf("ReaderAt(Whole(%s)): %v", v.Key, err)
		}
		got := make([]byte, w.Size)
		_, err = r.ReadAt(f.ctx, got, 0)
		r.Close()
		if err != nil && !errors.Is(err, io.EOF) || !bytes.Equal(got, f.mustRead(v.Key, "")) || w.ID != v.ID {
			t.Errorf("Whole(%s) reads %d other bytes (%v)", v.Key, len(got), err)
		}
	}
	// Nothing was written: each key has its one version, whole.
	for key, want := range map[string][]byte{"big": body, "small": []byte("inline")} {
		if got := f.mustRead(key, ""); !bytes.Equal(got, want) {
			t.Errorf("%s reads %d bytes, want %d", key, len(got), len(want))
		}
	}
	vs, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(vs.Versions); n != 2 {
		t.Errorf("%d versions after the refusals, want 2", n)
	}
}

// TestShareListed: a rename or a change of attributes of a version known
// by its attributes only, as the mount knows its files, shares the
// version's bytes all the same (the store reads its manifest as the new
// row commits), and fails with ErrConflict, writing nothing, once that
// version is gone.
func TestShareListed(t *testing.T) {
	for _, state := range []meta.Versioning{meta.Enabled, meta.Unversioned} {
		t.Run(state.String(), func(t *testing.T) {
			f := newFixture(t, state)
			body := randBytes(3*chunk + 5)
			f.put("big", body)
			f.put("small", []byte("inline"))
			f.put("gone", []byte("soon"))
			res, err := f.svc.List(f.ctx, "bkt", meta.ListOptions{Attrs: true})
			if err != nil {
				t.Fatal(err)
			}
			listed := map[string]*meta.Version{}
			for _, v := range res.Objects {
				if !v.NoManifest {
					t.Fatalf("%s listed with its manifest", v.Key)
				}
				listed[v.Key] = v
			}
			if _, err := f.svc.RenameVersion(f.ctx, "bkt", listed["small"], "moved", ""); err != nil {
				t.Fatal(err)
			}
			v, err := f.svc.ReplaceAttrs(f.ctx, "bkt", listed["big"], object.Attrs{UserMeta: map[string]string{"k": "v"}})
			if err != nil {
				t.Fatal(err)
			}
			for key, want := range map[string][]byte{"big": body, "moved": []byte("inline")} {
				if got := f.mustRead(key, ""); !bytes.Equal(got, want) {
					t.Errorf("%s reads %q…, want %q…", key, got[:min(len(got), 8)], want[:min(len(want), 8)])
				}
			}
			if head, err := f.svc.Head(f.ctx, "bkt", "big", ""); err != nil || head.ID != v.ID || head.UserMeta["k"] != "v" {
				t.Errorf("big's head: %+v, %v; want %s with the new attributes", head, err, v.ID)
			}
			if _, err := f.read("small", "", 0, -1); !errors.Is(err, meta.ErrNoSuchKey) {
				t.Errorf("small after its rename: %v, want ErrNoSuchKey", err)
			}

			before, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Delete(f.ctx, "bkt", "gone", object.DeleteOptions{VersionID: listed["gone"].WireID()}); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.RenameVersion(f.ctx, "bkt", listed["gone"], "moved2", ""); !errors.Is(err, meta.ErrConflict) {
				t.Errorf("rename of a version deleted since it was listed: %v, want ErrConflict", err)
			}
			after, err := f.svc.ListVersions(f.ctx, "bkt", meta.VersionListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(after.Versions) != len(before.Versions)-1 {
				t.Errorf("%d versions after the failed rename, want %d", len(after.Versions), len(before.Versions)-1)
			}
		})
	}
}
