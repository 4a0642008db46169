package integration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/data/storetest"
)

// TestFullDisk runs `stratafs serve --mount` with its data directory on
// a tmpfs of its own and fills that disk: S3 PUTs answer 507
// InsufficientStorage and store nothing, writing and closing files in
// the mount fail with ENOSPC, and everything stored before stays whole,
// a file overwritten in vain included. Once space is freed, both paths
// work again without a restart.
func TestFullDisk(t *testing.T) {
	skipWithoutFUSE(t)
	disk := t.TempDir()
	if err := syscall.Mount("tmpfs", disk, "tmpfs", 0, "size=48m"); err != nil {
		t.Skipf("SKIPPING FULL-DISK TEST: cannot mount a tmpfs to fill (%v); CI runs it as root", err)
	}
	t.Cleanup(func() { syscall.Unmount(disk, syscall.MNT_DETACH) })
	m := startServeMountIn(t, filepath.Join(disk, "data"), "full")
	c := m.c
	defer recoverMust(t)

	kept := storetest.Random(1, 3<<20)
	c.put("full", "kept", kept)
	c.put("full", "small", []byte("kept in its row"))
	noErr(t, os.WriteFile(m.path("file"), []byte("first"), 0o644))
	fsyncPath(t, m.path("file"))
	// Written from offset 4096, not from its start, the file is staged
	// on the disk as it is written; its chunks are written when it closes.
	pending := must(os.Create(m.path("pending")))
	must(pending.WriteAt(storetest.Random(2, 1<<20), 4096))

	filler := fill(t, disk)

	_, err := c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("full"), Key: aws.String("big"),
		Body: bytes.NewReader(storetest.Random(3, 2<<20))})
	wantErr(t, err, 507, "InsufficientStorage")
	// Small objects go to the meta store's file, which may have free
	// pages left: it runs out after a few.
	refused := ""
	var stored []string
	for i := 0; i < 200 && refused == ""; i++ {
		key := fmt.Sprintf("row%d", i)
		_, err := c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("full"), Key: &key,
			Body: bytes.NewReader(storetest.Random(uint64(100+i), 4000))})
		if err != nil {
			wantErr(t, err, 507, "InsufficientStorage")
			refused = key
		} else {
			stored = append(stored, key)
		}
	}
	if refused == "" {
		t.Fatal("200 PUTs of 4,000 bytes on a full disk all succeeded")
	}
	if err := pending.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close of a staged file on a full disk: %v, want ENOSPC", err)
	}
	m.absent("after its close failed", "pending")
	fill(t, disk) // the closed file's staged bytes were freed
	if err := os.WriteFile(m.path("file"), storetest.Random(4, 1<<20), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("overwriting a file on a full disk: %v, want ENOSPC", err)
	}

	check := func(when string) {
		t.Helper()
		for key, want := range map[string][]byte{"kept": kept, "small": []byte("kept in its row"), "file": []byte("first")} {
			if _, got := c.get("full", key, ""); !bytes.Equal(got, want) {
				t.Fatalf("%s: S3 reads %d bytes of %s, want its %d", when, len(got), key, len(want))
			}
		}
		for i, key := range stored {
			if _, got := c.get("full", key, ""); !bytes.Equal(got, storetest.Random(uint64(100+i), 4000)) {
				t.Fatalf("%s: S3 reads %d bytes of %s, want what its PUT stored", when, len(got), key)
			}
		}
		if got := m.read("file"); string(got) != "first" {
			t.Fatalf("%s: the mount reads %d bytes of file, want %q", when, len(got), "first")
		}
		for _, key := range []string{"big", refused, "pending"} {
			wantErr(t, c.getErr("full", key, ""), 404, "NoSuchKey")
		}
	}
	check("disk full")

	noErr(t, os.Remove(filler))
	check("space freed")
	big := storetest.Random(3, 2<<20)
	c.put("full", "big", big)
	if _, got := c.get("full", "big", ""); !bytes.Equal(got, big) {
		t.Fatalf("S3 reads %d bytes of big once space is freed, want %d", len(got), len(big))
	}
	second := storetest.Random(5, 1<<20)
	noErr(t, os.WriteFile(m.path("file"), second, 0o644))
	fsyncPath(t, m.path("file"))
	if _, got := c.get("full", "file", ""); !bytes.Equal(got, second) {
		t.Fatalf("S3 reads %d bytes of the file written once space is freed, want %d", len(got), len(second))
	}
}

// fill appends to a file in dir until its disk is full, and returns its
// name.
func fill(t *testing.T, dir string) string {
	t.Helper()
	name := filepath.Join(dir, "filler")
	f, err := os.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for size := 1 << 20; size >= 4096; size /= 4 {
		for {
			if _, err := f.Write(make([]byte, size)); errors.Is(err, syscall.ENOSPC) {
				break
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	return name
}

// TestChunksGone runs `stratafs serve --mount` and takes its chunk
// directories away while it runs, as when the disk that holds them is
// unmounted: S3 answers 503 ServiceUnavailable, not an internal error
// or a missing object, and stores nothing; the mount's reads fail with
// EIO. Once the directories are back, everything reads whole and writes
// work again, without a restart.
func TestChunksGone(t *testing.T) {
	data := t.TempDir()
	m := startServeMountIn(t, data, "gone")
	c := m.c
	defer recoverMust(t)
	kept := storetest.Random(1, 3<<20)
	c.put("gone", "kept", kept)
	if got := m.read("kept"); !bytes.Equal(got, kept) {
		t.Fatalf("the mount reads %d bytes of kept, want %d", len(got), len(kept))
	}
	// The kernel must read kept again, not answer from its page cache.
	noErr(t, os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0))

	dirs := []string{"chunks", "tmp"}
	for _, d := range dirs {
		noErr(t, os.Rename(filepath.Join(data, d), filepath.Join(data, d+".away")))
	}
	wantErr(t, c.getErr("gone", "kept", ""), 503, "ServiceUnavailable")
	_, err := c.c.PutObject(c.ctx, &awss3.PutObjectInput{Bucket: aws.String("gone"), Key: aws.String("big"),
		Body: bytes.NewReader(storetest.Random(2, 2<<20))})
	wantErr(t, err, 503, "ServiceUnavailable")
	if _, err := os.ReadFile(m.path("kept")); !errors.Is(err, syscall.EIO) {
		t.Fatalf("reading kept in the mount with its chunks gone: %v, want EIO", err)
	}

	for _, d := range dirs {
		noErr(t, os.Rename(filepath.Join(data, d+".away"), filepath.Join(data, d)))
	}
	if _, got := c.get("gone", "kept", ""); !bytes.Equal(got, kept) {
		t.Fatalf("S3 reads %d bytes of kept with its chunks back, want %d", len(got), len(kept))
	}
	if got := m.read("kept"); !bytes.Equal(got, kept) {
		t.Fatalf("the mount reads %d bytes of kept with its chunks back, want %d", len(got), len(kept))
	}
	wantErr(t, c.getErr("gone", "big", ""), 404, "NoSuchKey")
	big := storetest.Random(3, 2<<20)
	c.put("gone", "big", big)
	if _, got := c.get("gone", "big", ""); !bytes.Equal(got, big) {
		t.Fatalf("S3 reads %d bytes of big written with the chunks back, want %d", len(got), len(big))
	}
}
