package integration

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/data/storetest"
)

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
