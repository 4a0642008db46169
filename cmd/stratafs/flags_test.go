package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreFlags opens stores named by --meta and --data, before or after
// the command, and by their environment twins, which the flags beat.
func TestStoreFlags(t *testing.T) {
	c := cli{t, t.TempDir()}
	other := t.TempDir()
	metaURL := "bolt://" + filepath.Join(other, "m.db")
	dataURL := "file://" + filepath.Join(other, "chunks")
	c.ok("", "--meta", metaURL, "--data", dataURL, "bucket", "create", "docs")
	c.ok("hello", "put", "docs/k", "-", "--meta", metaURL, "--data", dataURL)
	if got := c.ok("", "get", "--meta="+metaURL, "--data="+dataURL, "docs/k"); got != "hello" {
		t.Fatalf("get through --meta = %q", got)
	}
	if _, err := os.Stat(filepath.Join(c.dir, "meta.db")); !os.IsNotExist(err) {
		t.Fatalf("the data directory's own meta store was opened: %v", err)
	}
	if code, _, errOut := c.run("", "get", "docs/k"); code != 1 || !strings.Contains(errOut, "no such bucket") {
		t.Fatalf("the default store holds the bucket: exit %d, %s", code, errOut)
	}

	t.Setenv("STRATAFS_META", metaURL)
	t.Setenv("STRATAFS_DATA", dataURL)
	if got := c.ok("", "get", "docs/k"); got != "hello" {
		t.Fatalf("get through STRATAFS_META = %q", got)
	}
	if got := c.ok("", "ls", "--meta", "memory://"); got != "" {
		t.Fatalf("--meta memory:// did not beat STRATAFS_META: ls = %q", got)
	}
	t.Setenv("STRATAFS_DATA_DIR", other)
	if got := c.ok("", "ls", "docs"); !strings.Contains(got, "k") {
		t.Fatalf("--data-dir did not beat STRATAFS_DATA_DIR: ls = %q", got)
	}
}

// TestBadStoreURLs: a URL that names no store is a usage error that
// names the URL.
func TestBadStoreURLs(t *testing.T) {
	c := cli{t, t.TempDir()}
	for _, args := range [][]string{
		{"--meta", "nope://x", "ls"},
		{"ls", "--meta", "bolt://"},
		{"bucket", "create", "b", "--meta", "cassandra://h/ks?shards=3"},
		{"key", "ls", "--meta", "tikv://pd"},
		{"gc", "--data", "s4://bucket"},
		{"fsck", "--meta", "memory://", "--data", "%zz"},
	} {
		code, _, errOut := c.run("", args...)
		if code != 2 || !strings.Contains(errOut, "store URL") || !strings.Contains(errOut, "\nusage: stratafs ") {
			t.Errorf("stratafs %v: exit %d, stderr %q; want exit 2 naming the store URL and the usage", args, code, errOut)
		}
	}
}

// TestEnvTwins: every flag of serve and mount has an environment twin,
// which a flag on the command line beats; one-shot commands' flags have
// none.
func TestEnvTwins(t *testing.T) {
	c := cli{t, t.TempDir()}
	t.Setenv("STRATAFS_GC_GRACE", "0")
	if code, _, errOut := c.run("", "serve"); code != 2 || !strings.Contains(errOut, "--gc-grace \"0\"") {
		t.Fatalf("serve with STRATAFS_GC_GRACE=0: exit %d, %q", code, errOut)
	}
	// The flag wins, so serve gets as far as the TLS check.
	if code, _, errOut := c.run("", "serve", "--gc-grace", "1h", "--tls-cert", "x"); code != 2 || !strings.Contains(errOut, "go together") {
		t.Fatalf("serve --gc-grace 1h with STRATAFS_GC_GRACE=0: exit %d, %q", code, errOut)
	}
	t.Setenv("STRATAFS_GC_GRACE", "1h")
	t.Setenv("STRATAFS_UID", "nobody")
	if code, _, errOut := c.run("", "mount", "b", t.TempDir()); code != 2 || !strings.Contains(errOut, `STRATAFS_UID="nobody"`) {
		t.Fatalf("mount with STRATAFS_UID=nobody: exit %d, %q", code, errOut)
	}
	c.ok("", "bucket", "create", "docs")
	c.ok("v", "put", "docs/k", "-")
	t.Setenv("STRATAFS_VERSION", "1.2.3")
	if got := c.ok("", "get", "docs/k"); got != "v" {
		t.Fatalf("get with STRATAFS_VERSION set = %q", got)
	}
}
