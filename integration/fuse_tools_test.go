package integration

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sfs "github.com/stratafs/stratafs/fs"
)

// The everyday tools that copy trees must work on the mount as on a
// disk: cp -a, rsync -a, git clone. Each test skips, loudly, when its
// tool is missing (.ci/run installs them).

// fuseTool returns the path of a tool, or skips the test.
func fuseTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("SKIPPING: %s is not installed here (%v); CI installs it", name, err)
	}
	return p
}

// run runs a command that must succeed and returns its output.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// sourceTree builds a tree of files of every storage size (empty, inline,
// one chunk, several), nested directories, a symlink, modes and mtimes.
func sourceTree(t *testing.T) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	files := map[string][]byte{
		"empty":            nil,
		"small.txt":        []byte("small\n"),
		"a/one-chunk":      fuseRandom(fuseChunk - 1),
		"a/b/many-chunks":  fuseRandom(3*fuseChunk + 1),
		"a/b/c/deep.txt":   []byte("deep\n"),
		"with space/x y z": []byte("spaces\n"),
	}
	for name, b := range files {
		p := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(src, "a/b/c/deep.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(src, "empty-dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a/b/c/deep.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	// Every mtime in the past, directories last: they change as their
	// entries are made.
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 || d.IsDir() {
			return err
		}
		return os.Chtimes(p, mtime, mtime)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a/b/c", "a/b", "a", "empty-dir", "with space", "."} {
		if err := os.Chtimes(filepath.Join(src, d), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	return src
}

// sameTree checks that got is a copy of want: diff -r finds nothing, and
// types, modes, symlinks and (unless skipMtimes) mtimes agree.
func sameTree(t *testing.T, want, got string) {
	t.Helper()
	if out, err := exec.Command("diff", "-r", want, got).CombinedOutput(); err != nil {
		t.Fatalf("diff -r %s %s: %v\n%s", want, got, err, out)
	}
	if diff := compareTrees(want, got); diff != "" {
		t.Fatal(diff)
	}
	err := filepath.WalkDir(want, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.Type()&fs.ModeSymlink != 0 {
			return err
		}
		rel, _ := filepath.Rel(want, p)
		w, err := os.Stat(p)
		if err != nil {
			return err
		}
		g, err := os.Stat(filepath.Join(got, rel))
		if err != nil {
			return err
		}
		if !g.ModTime().Equal(w.ModTime()) {
			t.Errorf("%s: mtime %v, want %v", rel, g.ModTime(), w.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// oneVersionEach checks that every regular file copied under dir (a
// directory of the mount) was made by exactly one version. (A symlink is
// given its owner and times by path once made, which joins its first
// version only while that waits to be committed.)
func (f *fuseMount) oneVersionEach(src, dir string) {
	f.t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if n := len(f.versions(dir + "/" + rel)); n != 1 {
			f.t.Errorf("%s/%s: %d versions, want 1", dir, rel, n)
		}
		return nil
	})
	if err != nil {
		f.t.Fatal(err)
	}
}

func TestFUSECpA(t *testing.T) {
	cp := fuseTool(t, "cp")
	fuseTool(t, "diff")
	f := newFUSEMount(t, sfs.Options{})
	src := sourceTree(t)
	run(t, f.dir, cp, "-a", src, f.path("copy"))
	sameTree(t, src, f.path("copy"))
	f.oneVersionEach(src, "copy")
}

func TestFUSERsyncA(t *testing.T) {
	rsync := fuseTool(t, "rsync")
	fuseTool(t, "diff")
	f := newFUSEMount(t, sfs.Options{})
	src := sourceTree(t)
	run(t, f.dir, rsync, "-a", src+"/", f.path("copy")+"/")
	sameTree(t, src, f.path("copy"))
	// rsync writes a temporary file, sets its times and modes, then
	// renames it into place: the renamed version is the file's only one.
	f.oneVersionEach(src, "copy")

	// A second run finds nothing to do; after a change it rewrites only
	// the file that changed.
	before := len(f.versions("copy/small.txt"))
	run(t, f.dir, rsync, "-a", src+"/", f.path("copy")+"/")
	if err := os.WriteFile(filepath.Join(src, "a/b/c/deep.txt"), []byte("changed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run(t, f.dir, rsync, "-a", src+"/", f.path("copy")+"/")
	sameTree(t, src, f.path("copy"))
	if n := len(f.versions("copy/small.txt")); n != before {
		t.Errorf("an unchanged file has %d versions after two more runs, had %d", n, before)
	}
	if n := len(f.versions("copy/a/b/c/deep.txt")); n != 2 {
		t.Errorf("the changed file has %d versions, want 2", n)
	}
}

func TestFUSEGitClone(t *testing.T) {
	git := fuseTool(t, "git")
	fuseTool(t, "diff")
	f := newFUSEMount(t, sfs.Options{})
	src := sourceTree(t)
	home := t.TempDir()
	run(t, src, git, "init", "-q", "-b", "main")
	run(t, src, git, "add", "-A")
	run(t, src, git, "commit", "-q", "-m", "first")
	if err := os.WriteFile(filepath.Join(src, "small.txt"), []byte("second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, src, git, "commit", "-q", "-a", "-m", "second")

	run(t, home, git, "clone", "-q", src, f.path("clone"))
	clone := f.path("clone")
	if out := run(t, clone, git, "status", "--porcelain"); out != "" {
		t.Errorf("git status in the clone:\n%s", out)
	}
	run(t, clone, git, "fsck", "--strict", "--no-progress")
	if out := run(t, clone, git, "log", "--format=%s"); out != "second\nfirst\n" {
		t.Errorf("git log in the clone: %q", out)
	}
	// The work tree is the source's, .git aside (empty directories are
	// not tracked).
	out, err := exec.Command("diff", "-r", "--exclude=.git", "--exclude=empty-dir", src, clone).CombinedOutput()
	if err != nil {
		t.Fatalf("diff -r: %v\n%s", err, out)
	}
	// Work in the clone: commit a change, and the tree stays clean.
	if err := os.WriteFile(filepath.Join(clone, "new.txt"), bytes.Repeat([]byte("x"), 10000), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, clone, git, "add", "new.txt")
	run(t, clone, git, "commit", "-q", "-m", "in the mount")
	if out := run(t, clone, git, "status", "--porcelain"); out != "" {
		t.Errorf("git status after a commit in the mount:\n%s", out)
	}
	if out := run(t, clone, git, "rev-list", "--count", "HEAD"); out != fmt.Sprintln(3) {
		t.Errorf("commits: %q", out)
	}
}
