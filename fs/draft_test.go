package fs

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// newTestFsys returns a mount's state over in-memory metadata, without a
// mount: enough for drafts and the journal.
func newTestFsys(t *testing.T) *fsys {
	t.Helper()
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	svc := object.New(m, d, object.Options{ChunkSize: 64 << 10})
	if _, err := svc.CreateBucket(context.Background(), "bkt", ""); err != nil {
		t.Fatal(err)
	}
	f := &fsys{svc: svc, bucket: "bkt", opts: Options{StagingDir: t.TempDir()}, log: slog.Default(),
		invalid: func(string) {}, streams: make(chan struct{}, maxStreams)}
	f.j = newJournal(svc, "bkt", f.log, &f.own, func(string) {})
	t.Cleanup(f.j.close)
	return f
}

// TestAStreamTooOldIsStaged cuts a stream short, as its timer does once
// it has run for maxStreamAge: the bytes go on from the staging file and
// the file commits as if it had been staged all along.
func TestAStreamTooOldIsStaged(t *testing.T) {
	f := newTestFsys(t)
	ctx := context.Background()
	p := meta.POSIX{Mode: 0o100644, Mtime: time.Now()}
	d, err := f.newDraft(nil, object.Attrs{POSIX: &p})
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	key := func() (string, bool) { return "k", true }
	body := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320,000 bytes: several chunks
	half := len(body) / 2
	for off := 0; off < half; off += 1000 {
		if _, err := d.writeAt(body[off:off+1000], int64(off), key); err != nil {
			t.Fatal(err)
		}
	}
	s := d.stream
	if s == nil {
		t.Fatal("a file written from its start in order is not streamed")
	}
	d.spillOld(s)
	if d.stream != nil || d.stage == nil {
		t.Fatal("the stream was not staged")
	}
	d.spillOld(s) // a stream already ended: nothing to do
	for off := half; off < len(body); off += 1000 {
		if _, err := d.writeAt(body[off:off+1000], int64(off), key); err != nil {
			t.Fatal(err)
		}
	}
	if d.stream != nil {
		t.Error("a staged file started streaming again")
	}
	got := make([]byte, len(body))
	if n, err := d.readAt(ctx, got, 0); n != len(body) || err != nil || !bytes.Equal(got, body) {
		t.Fatalf("the draft reads %d bytes, %v", n, err)
	}
	commitAndCheck(t, f, d, body, "")
}

// commitAndCheck commits draft d as key k and checks that the store then
// holds want, with its CRC32C as its checksum and an opaque ETag.
func commitAndCheck(t *testing.T, f *fsys, d *draft, want []byte, what string) {
	t.Helper()
	ctx := t.Context()
	_, c, err := d.commit(ctx, "k", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.j.wait(c); err != nil {
		t.Fatal(err)
	}
	obj, err := f.svc.Get(ctx, "bkt", "k", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	stored, err := io.ReadAll(obj.Body)
	sum := base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.Checksum(want, crc32.MakeTable(crc32.Castagnoli))))
	if err != nil || !bytes.Equal(stored, want) || !strings.HasSuffix(obj.ETag, "-0") || obj.Checksums["CRC32C"] != sum {
		t.Errorf("%s: stored %d bytes (%v), etag %s, checksums %v", what, len(stored), err, obj.ETag, obj.Checksums)
	}
}

// TestSmallFilesAreHeld: a file written from its start in order is held
// in memory while it is small, and put whole by its commit; past maxHeld
// it is streamed, the bytes held first, and any other access stages them.
func TestSmallFilesAreHeld(t *testing.T) {
	f := newTestFsys(t)
	ctx := context.Background()
	key := func() (string, bool) { return "k", true }
	body := bytes.Repeat([]byte("0123456789abcdef"), maxHeld/16+100) // past maxHeld
	for _, tc := range []struct {
		name   string
		size   int
		read   bool // read the draft before the commit
		stream bool // streamed, not held
	}{
		{"small", 3000, false, false},
		{"read", 3000, true, false},
		{"big", len(body), false, true},
	} {
		p := meta.POSIX{Mode: 0o100644, Mtime: time.Now()}
		d, err := f.newDraft(nil, object.Attrs{POSIX: &p})
		if err != nil {
			t.Fatal(err)
		}
		defer d.close()
		want := body[:tc.size]
		for off := 0; off < len(want); off += 1000 {
			if _, err := d.writeAt(want[off:min(off+1000, len(want))], int64(off), key); err != nil {
				t.Fatal(err)
			}
		}
		if streamed := d.stream != nil; streamed != tc.stream || d.stage != nil {
			t.Errorf("%s: streamed %v, staged %v", tc.name, streamed, d.stage != nil)
		}
		if tc.read {
			got := make([]byte, len(want))
			if n, err := d.readAt(ctx, got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: the draft reads %d bytes, %v", tc.name, n, err)
			}
		}
		commitAndCheck(t, f, d, want, tc.name)
	}
}

// TestSmallBaseReadLazily: a draft of a version whose bytes are all in
// its row makes its reader of them only when it first reads them, and
// then reads them right; a draft of a chunked version holds the chunks
// against the collector at once.
func TestSmallBaseReadLazily(t *testing.T) {
	f := newTestFsys(t)
	ctx := context.Background()
	key := func() (string, bool) { return "k", true }
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
	}{
		{"inline", 3000, false},
		{"chunked", 200 << 10, true},
	} {
		body := bytes.Repeat([]byte(tc.name), tc.size/len(tc.name))
		v, err := f.svc.Put(ctx, "bkt", "k", bytes.NewReader(body), object.PutOptions{Size: int64(len(body))})
		if err != nil {
			t.Fatal(err)
		}
		d, err := f.newDraft(v, object.Attrs{})
		if err != nil {
			t.Fatal(err)
		}
		defer d.close()
		if held := d.baseR != nil; held != tc.chunked {
			t.Fatalf("%s: base reader made at once: %v, want %v", tc.name, held, tc.chunked)
		}
		if _, err := d.writeAt([]byte("!"), 10, key); err != nil {
			t.Fatal(err)
		}
		want := bytes.Clone(body)
		want[10] = '!'
		got := make([]byte, len(want))
		if n, err := d.readAt(ctx, got, 0); n != len(want) || err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: the draft reads %d bytes, %v; want the base with one byte written", tc.name, n, err)
		}
		if d.baseR == nil {
			t.Fatalf("%s: no base reader after reading the base", tc.name)
		}
	}
}
