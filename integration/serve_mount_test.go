package integration

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestServeMount runs `stratafs serve --mount`: one process serves S3 and
// mounts the bucket over the same core, so each path sees the other's
// writes and deletes at once.
func TestServeMount(t *testing.T) {
	m := startServeMount(t, "shared")
	dir, c, p := m.dir, m.c, m.servedProcess
	defer recoverMust(t)

	c.put("shared", "docs/a.txt", []byte("from s3"))
	got, err := os.ReadFile(filepath.Join(dir, "docs", "a.txt"))
	if err != nil || string(got) != "from s3" {
		t.Fatalf("the mount reads %q, %v; want the S3 PUT", got, err)
	}

	f, err := os.Create(filepath.Join(dir, "docs", "b.txt"))
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("from the mount")
	if err := f.Sync(); err != nil { // durable and visible to every reader
		t.Fatal(err)
	}
	f.Close()
	_, body := c.get("shared", "docs/b.txt", "")
	eq(t, "S3 reads the mount's file", string(body), "from the mount")

	c.del("shared", "docs/a.txt", "")
	if _, err := os.Stat(filepath.Join(dir, "docs", "a.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after an S3 DELETE the mount stats a.txt: %v", err)
	}
	ents, err := os.ReadDir(filepath.Join(dir, ".versions", "docs", "a.txt"))
	if err != nil || len(ents) != 2 || strings.HasSuffix(ents[0].Name(), ".deleted") == strings.HasSuffix(ents[1].Name(), ".deleted") {
		t.Fatalf(".versions/docs/a.txt = %v, %v; want the version and the delete marker", ents, err)
	}
	p.stop(t, syscall.SIGTERM)
	if _, err := os.Stat(filepath.Join(dir, ".versions")); err == nil {
		t.Fatal("the mount outlived serve")
	}
}

// A servedMount is `stratafs serve --mount BUCKET:DIR` of a versioned
// bucket on a new data directory: the process, the mount point and an
// SDK client with the root credentials.
type servedMount struct {
	*servedProcess
	dir string
	c   s3Test
}

// startServeMount creates bucket, versioned, in a new data directory and
// starts serve mounting it. It skips, loudly, where FUSE or the time to
// build the binary is missing.
func startServeMount(t *testing.T, bucket string) *servedMount {
	t.Helper()
	return startServeMountIn(t, t.TempDir(), bucket)
}

// startServeMountIn is startServeMount with the data directory dataDir.
func startServeMountIn(t *testing.T, dataDir, bucket string) *servedMount {
	t.Helper()
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildStratafs(t)
	stratafs(t, bin, dataDir, "bucket", "create", bucket)
	stratafs(t, bin, dataDir, "bucket", "versioning", bucket, "enabled")
	dir := t.TempDir()
	p := startServe(t, bin, dataDir, "--mount", bucket+":"+dir, "--gc-interval", "0")
	// Runs before the process is killed: a failed test leaves no mount.
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	waitMounted(t, dir)
	srv := &s3Server{url: p.endpoint, tr: &http.Transport{}}
	root := exported(t, strings.Join(p.stdout, "\n"))
	c := s3Test{t: t, ctx: context.Background(), c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: root}
	})}
	return &servedMount{servedProcess: p, dir: dir, c: c}
}

// waitMounted waits until dir is a stratafs mount (its hidden .versions
// answers), for at most a minute.
func waitMounted(t *testing.T, dir string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, ".versions")); err == nil {
			return
		}
	}
	t.Fatalf("%s was not mounted within a minute", dir)
}
