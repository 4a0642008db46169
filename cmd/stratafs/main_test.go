package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cli runs one command line against dir and returns its exit code and
// output, as a user at a shell would see them.
type cli struct {
	t   *testing.T
	dir string
}

func (c cli) run(stdin string, args ...string) (code int, stdout, stderr string) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), append([]string{"--data-dir", c.dir}, args...), strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

// ok runs a command that must succeed and returns its standard output.
func (c cli) ok(stdin string, args ...string) string {
	c.t.Helper()
	code, out, errOut := c.run(stdin, args...)
	if code != 0 {
		c.t.Fatalf("stratafs %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

func TestCLIVersionsWalkThrough(t *testing.T) {
	c := cli{t, t.TempDir()}
	c.ok("", "bucket", "create", "docs")
	c.ok("", "bucket", "versioning", "docs", "enabled")
	if got := c.ok("", "bucket", "versioning", "docs"); got != "enabled\n" {
		t.Fatalf("versioning = %q", got)
	}
	first := strings.Fields(c.ok("v1", "put", "docs/a/b.txt", "-"))[0]
	time.Sleep(2 * time.Millisecond)
	between := time.Now().UTC().Format(time.RFC3339Nano)
	file := filepath.Join(t.TempDir(), "in")
	os.WriteFile(file, []byte("v2"), 0o600)
	c.ok("", "put", "docs/a/b.txt", file)

	if got := c.ok("", "get", "docs/a/b.txt"); got != "v2" {
		t.Fatalf("get = %q", got)
	}
	if got := c.ok("", "get", "docs/a/b.txt", "--version", first); got != "v1" {
		t.Fatalf("get --version = %q", got)
	}
	if got := c.ok("", "get", "--as-of", between, "docs/a/b.txt"); got != "v1" {
		t.Fatalf("get --as-of = %q", got)
	}
	out := filepath.Join(t.TempDir(), "out")
	c.ok("", "get", "docs/a/b.txt", out)
	if b, _ := os.ReadFile(out); string(b) != "v2" {
		t.Fatalf("get to file wrote %q", b)
	}
	if ls := c.ok("", "ls", "docs"); !strings.Contains(ls, "DIR") || !strings.Contains(ls, "a/") {
		t.Fatalf("ls docs = %q", ls)
	}
	if ls := c.ok("", "ls", "docs/a/"); !strings.Contains(ls, "a/b.txt") {
		t.Fatalf("ls docs/a/ = %q", ls)
	}

	rm := c.ok("", "rm", "docs/a/b.txt")
	marker := strings.Fields(rm)[2]
	if ls := c.ok("", "ls", "docs", "--recursive"); ls != "" {
		t.Fatalf("deleted key still listed: %q", ls)
	}
	versions := c.ok("", "ls", "docs", "--versions", "--recursive")
	if n := strings.Count(versions, "\n"); n != 3 || !strings.Contains(versions, marker) || !strings.Contains(versions, "deleted,latest") {
		t.Fatalf("versions = %q", versions)
	}
	if ls := c.ok("", "ls", "docs", "--recursive", "--as-of", between); !strings.Contains(ls, "a/b.txt") {
		t.Fatalf("as-of listing = %q", ls)
	}
	c.ok("", "rm", "docs/a/b.txt", "--version", marker)
	if got := c.ok("", "get", "docs/a/b.txt"); got != "v2" {
		t.Fatalf("after undelete get = %q", got)
	}
	if ls := c.ok("", "bucket", "ls"); !strings.Contains(ls, "enabled") || !strings.Contains(ls, "docs") {
		t.Fatalf("bucket ls = %q", ls)
	}
}

func TestCLIErrors(t *testing.T) {
	c := cli{t, t.TempDir()}
	c.ok("", "bucket", "create", "docs")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{}, 2, "usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"put", "docs"}, 2, "wrong number of arguments"},
		{[]string{"put", "docs", "-"}, 2, "not BUCKET/KEY"},
		{[]string{"get", "docs/k", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"bucket", "create", "Bad_Name"}, 1, "invalid bucket name"},
		{[]string{"bucket", "create", "docs"}, 1, "bucket already exists"},
		{[]string{"bucket", "versioning", "docs", "sometimes"}, 1, "invalid versioning"},
		{[]string{"get", "docs/missing"}, 1, "no such key"},
		{[]string{"get", "nope/k"}, 1, "no such bucket"},
		{[]string{"get", "docs/k", "--version", "zz"}, 1, "invalid version id"},
		{[]string{"put", "docs/k", "/nonexistent/file"}, 1, "no such file"},
		{[]string{"ls", "docs", "--as-of", "yesterday"}, 2, "RFC 3339"},
		{[]string{"mount", "docs", "/nonexistent", "--as-of", "yesterday"}, 2, "--as-of: time \"yesterday\" is not RFC 3339"},
	} {
		code, _, errOut := c.run("", tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 && tc.code == 1 {
			t.Errorf("stratafs %v: exit %d, stderr %q; want exit %d mentioning %q on one line", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
	c.ok("x", "put", "docs/k", "-")
	c.ok("", "bucket", "versioning", "docs", "enabled")
	if code, _, errOut := c.run("", "bucket", "rm", "docs"); code != 1 || !strings.Contains(errOut, "not empty") {
		t.Errorf("rm of a non-empty bucket: exit %d, %q", code, errOut)
	}
	if code, _, errOut := c.run("", "bucket", "versioning", "docs", "unversioned"); code != 1 || !strings.Contains(errOut, "invalid versioning") {
		t.Errorf("back to unversioned: exit %d, %q", code, errOut)
	}
}
