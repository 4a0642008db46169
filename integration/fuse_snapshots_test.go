package integration

import (
	"bytes"
	"crypto/md5"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/internal/timetest"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A snapEntry is a file or symlink of a snapModel.
type snapEntry struct {
	perm   os.FileMode
	data   []byte
	target string // a symlink's; "" for a file
}

// A snapModel is the tree a test expects the mount to show: its files and
// symlinks, and its explicit directories (made by mkdir; a directory
// with a key under it exists anyway).
type snapModel struct {
	entries map[string]snapEntry
	dirs    map[string]bool
}

func (m *snapModel) clone() *snapModel {
	return &snapModel{entries: maps.Clone(m.entries), dirs: maps.Clone(m.dirs)}
}

// isDir reports whether p is a directory: explicit, or with something
// under it.
func (m *snapModel) isDir(p string) bool { return p == "." || m.dirs[p] || m.holds(p) }

// holds reports whether anything lies under the directory p.
func (m *snapModel) holds(p string) bool {
	under := func(q string) bool { return strings.HasPrefix(q, p+"/") }
	return slices.ContainsFunc(slices.Collect(maps.Keys(m.entries)), under) ||
		slices.ContainsFunc(slices.Collect(maps.Keys(m.dirs)), under)
}

// describe returns the model as describeTree describes a read-only view
// of it: every write permission cleared.
func (m *snapModel) describe() map[string]string {
	out := map[string]string{}
	dir := func(p string) {
		for ; p != "."; p = path.Dir(p) {
			out[p] = (os.ModeDir | 0o555).String()
		}
	}
	for p, e := range m.entries {
		if e.target != "" {
			out[p] = (os.ModeSymlink | 0o555).String() + " -> " + e.target
		} else {
			out[p] = fmt.Sprintf("%s %d bytes md5 %x", (e.perm &^ 0o222).String(), len(e.data), md5.Sum(e.data))
		}
		dir(path.Dir(p))
	}
	for p := range m.dirs {
		dir(p)
	}
	return out
}

// TestFUSESnapshots writes, overwrites, deletes, renames, chmods, links
// and makes and removes directories in the mount (and writes keys over
// the core, as S3 would, for directories with no marker) over an hour of
// fake time, recording the tree after every step; then
// .snapshots/<instant>/ at chosen instants (each step's, between steps,
// before the first, in UTC and with an offset, with and without
// fractional seconds) is exactly the tree recorded then. Views refuse
// every change with EROFS, .snapshots is hidden from the root and takes
// nothing but instants, and `stratafs mount --as-of` shows a view as its
// root.
func TestFUSESnapshots(t *testing.T) {
	skipWithoutFUSE(t)
	if !timetest.Alone(t) {
		return
	}
	ctx := t.Context()
	base := t.TempDir()
	clock := timetest.NewClock()
	svc, closeStores, err := backend.Open(backend.Config{Dir: base}, object.Options{ChunkSize: fuseChunk, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVersioning(ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	// No caching in the live tree, so that the steps see the store;
	// views of settled instants set their own timeouts.
	mp, err := fs.Mount(ctx, svc, "bkt", mnt, fs.Options{StagingDir: filepath.Join(base, "staging")})
	if err != nil {
		t.Fatal(err)
	}
	stop := sync.OnceFunc(func() {
		if err := mp.Unmount(); err != nil {
			t.Errorf("%v; detaching it", err)
			syscall.Unmount(mnt, syscall.MNT_DETACH)
			<-mp.Done()
		}
		closeStores()
	})
	t.Cleanup(stop)
	in := func(p string) string { return filepath.Join(mnt, p) }
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	rng := rand.New(rand.NewPCG(2026, 6))
	files := []string{"a", "b", "d/p", "d/q", "d/e/r", "g/t", "g/h/u"}
	links := []string{"l", "d/l2"}
	dirs := []string{"d", "d/e", "g", "g/h", "k"}
	body := func() []byte {
		n := rng.IntN(3 << 10)
		if rng.IntN(10) == 0 {
			n = fuseChunk + rng.IntN(2*fuseChunk) // more than one chunk
		}
		return fuseRandom(n)
	}
	cur := &snapModel{entries: map[string]snapEntry{}, dirs: map[string]bool{}}
	// parents makes the missing directories above p with mkdir.
	parents := func(p string) {
		t.Helper()
		var missing []string
		for d := path.Dir(p); !cur.isDir(d); d = path.Dir(d) {
			missing = append(missing, d)
		}
		for _, d := range slices.Backward(missing) {
			must("mkdir "+d, os.Mkdir(in(d), 0o755))
			cur.dirs[d] = true
		}
	}
	pick := func(names []string, ok func(string) bool) (string, bool) {
		var can []string
		for _, n := range names {
			if ok(n) {
				can = append(can, n)
			}
		}
		if len(can) == 0 {
			return "", false
		}
		return can[rng.IntN(len(can))], true
	}
	exists := func(p string) bool { _, ok := cur.entries[p]; return ok }
	isFile := func(p string) bool { return exists(p) && cur.entries[p].target == "" }

	// Step i starts at from[i], when the clock was set, and ends at at[i],
	// its last row's time; steps[i] is the tree from then until from[i+1].
	var steps []*snapModel
	var from, at []time.Time
	start := clock.Now()
	for now := start; now.Sub(start) < time.Hour; {
		now = clock.Advance(time.Duration(1+rng.IntN(60_000)) * time.Millisecond)
		var what string
		switch op := rng.IntN(16); {
		case op < 4: // write or overwrite in the mount
			p := files[rng.IntN(len(files))]
			parents(p)
			b, e := body(), snapEntry{perm: 0o644}
			if exists(p) {
				e.perm = cur.entries[p].perm
			}
			must("write "+p, os.WriteFile(in(p), b, 0o644))
			e.data = b
			cur.entries[p] = e
			what = fmt.Sprintf("write %s (%d bytes)", p, len(b))
		case op < 6: // write over the core: no marker for the directories
			p, b := files[rng.IntN(len(files))], body()
			if _, err := svc.Put(ctx, "bkt", p, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))}); err != nil {
				t.Fatal(err)
			}
			cur.entries[p] = snapEntry{perm: 0o666, data: b}
			what = fmt.Sprintf("put %s (%d bytes)", p, len(b))
		case op < 8: // unlink
			p, ok := pick(slices.Concat(files, links), exists)
			if !ok {
				continue
			}
			must("unlink "+p, os.Remove(in(p)))
			delete(cur.entries, p)
			what = "unlink " + p
		case op < 10: // rename a file, over another or not
			src, ok := pick(files, isFile)
			dst := files[rng.IntN(len(files))]
			if !ok || src == dst {
				continue
			}
			parents(dst)
			must("rename "+src, os.Rename(in(src), in(dst)))
			cur.entries[dst] = cur.entries[src]
			delete(cur.entries, src)
			what = "rename " + src + " to " + dst
		case op < 11: // chmod
			p, ok := pick(files, isFile)
			if !ok {
				continue
			}
			perm := []os.FileMode{0o600, 0o640, 0o755, 0o444}[rng.IntN(4)]
			must("chmod "+p, os.Chmod(in(p), perm))
			e := cur.entries[p]
			e.perm = perm
			cur.entries[p] = e
			what = fmt.Sprintf("chmod %s %o", p, perm)
		case op < 12: // symlink
			p, ok := pick(links, func(p string) bool { return !exists(p) })
			if !ok {
				continue
			}
			parents(p)
			target := []string{"a", "../d/p", "nowhere"}[rng.IntN(3)]
			must("symlink "+p, os.Symlink(target, in(p)))
			cur.entries[p] = snapEntry{target: target}
			what = "symlink " + p + " -> " + target
		case op < 14: // mkdir
			d, ok := pick(dirs, func(d string) bool { return !cur.isDir(d) && cur.isDir(path.Dir(d)) })
			if !ok {
				continue
			}
			must("mkdir "+d, os.Mkdir(in(d), 0o755))
			cur.dirs[d] = true
			what = "mkdir " + d
		default: // rmdir of an empty directory
			d, ok := pick(dirs, func(d string) bool { return cur.dirs[d] && !cur.holds(d) })
			if !ok {
				continue
			}
			must("rmdir "+d, os.Remove(in(d)))
			delete(cur.dirs, d)
			what = "rmdir " + d
		}
		// Each step commits before the next, which would otherwise join a
		// change still queued (a chmod joins the queued version of its file).
		syncMount(t, mnt)
		steps = append(steps, cur.clone())
		from, at = append(from, now), append(at, timetest.LastStamp())
		t.Logf("%8s %s", at[len(at)-1].Sub(start).Round(time.Millisecond), what)
	}
	if len(steps) < 40 {
		t.Fatalf("only %d steps in an hour", len(steps))
	}

	// The mount's own directories are hidden from the root, and
	// .snapshots takes instants only.
	names, err := os.ReadDir(mnt)
	must("readdir of the root", err)
	for _, e := range names {
		if e.Name() == ".snapshots" || e.Name() == ".versions" {
			t.Errorf("the root lists %s", e.Name())
		}
	}
	if fi, err := os.Stat(in(".snapshots")); err != nil || !fi.IsDir() {
		t.Fatalf(".snapshots: %v, %v", fi, err)
	}
	if names, err := os.ReadDir(in(".snapshots")); err != nil || len(names) != 0 {
		t.Errorf(".snapshots lists %v, %v; want nothing", names, err)
	}
	for _, bad := range []string{"yesterday", "2026-12-02", "2026-12-02T10:15:00", "2026-12-02 10:15:00Z", "1764670500"} {
		_, err := os.Stat(in(".snapshots/" + bad))
		fuseWantErrno(t, ".snapshots/"+bad, err, syscall.ENOENT)
	}

	view := func(instant time.Time, layout string) string {
		return in(".snapshots/" + instant.Format(layout))
	}
	check := func(what, dir string, want *snapModel) {
		t.Helper()
		got, err := describeTree(dir)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if diff := diffTrees(want.describe(), got); diff != "" {
			t.Fatalf("%s (%s): %s", what, dir, diff)
		}
	}
	east := time.FixedZone("+05:30", 5*3600+1800)
	check("before the first step", view(from[0].Add(-time.Nanosecond), time.RFC3339Nano), &snapModel{})
	check("before 1970", view(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC), time.RFC3339), &snapModel{})
	for i := range steps {
		check(fmt.Sprintf("step %d", i), view(at[i], time.RFC3339Nano), steps[i])
		if i+1 == len(steps) {
			break
		}
		between := at[i].Add(time.Duration(rng.Int64N(int64(from[i+1].Sub(at[i])))))
		if s := between.Truncate(time.Second); s.After(at[i]) {
			// Whole seconds, named without fractional seconds.
			check(fmt.Sprintf("between steps %d and %d", i, i+1), view(s.In(east), time.RFC3339), steps[i])
		} else {
			check(fmt.Sprintf("between steps %d and %d", i, i+1), view(between.In(east), time.RFC3339Nano), steps[i])
		}
	}
	check("in the future", view(clock.Now().Add(24*time.Hour), time.RFC3339), cur)
	check("past the last instant an id can hold", in(".snapshots/9999-12-31T23:59:59Z"), cur)

	// Nothing in a view can be changed, nor moved into one.
	last := len(steps) - 1
	for i := range steps {
		if len(steps[i].entries) > len(steps[last].entries) {
			last = i // the richest view
		}
	}
	snap := view(at[last], time.RFC3339Nano)
	file, _ := pick(files, func(p string) bool { return steps[last].entries[p].target == "" && steps[last].entries[p].perm != 0 })
	if file == "" {
		t.Fatal("no file in any view")
	}
	sf := filepath.Join(snap, file)
	refused := map[string]error{
		"create":               os.WriteFile(filepath.Join(snap, "new"), nil, 0o644),
		"open for writing":     openWrite(sf),
		"truncate":             os.Truncate(sf, 0),
		"unlink":               os.Remove(sf),
		"rename":               os.Rename(sf, filepath.Join(snap, "moved")),
		"chmod":                os.Chmod(sf, 0o777),
		"chmod of a directory": os.Chmod(snap, 0o777),
		"setxattr":             unix.Setxattr(sf, "user.x", []byte("y"), 0),
		"mkdir":                os.Mkdir(filepath.Join(snap, "x"), 0o755),
		"symlink":              os.Symlink("a", filepath.Join(snap, "link")),
		"rmdir":                os.Remove(filepath.Join(snap, path.Dir(file))),
		"mkdir in .snapshots":  os.Mkdir(in(".snapshots/x"), 0o755),
	}
	for what, err := range refused {
		if path.Dir(file) == "." && what == "rmdir" {
			continue
		}
		fuseWantErrno(t, what+" in a view", err, syscall.EROFS)
	}
	if live, ok := pick(files, isFile); ok {
		fuseWantErrno(t, "rename into a view", os.Rename(in(live), filepath.Join(snap, "moved")), syscall.EROFS)
		check("the view after the refusals", snap, steps[last])
		if _, err := os.Stat(in(live)); err != nil {
			t.Errorf("%s after the refused rename: %v", live, err)
		}
	}

	// stratafs mount --as-of shows the same view as its root.
	if testing.Short() {
		t.Log("-short: not building the binary for mount --as-of")
		return
	}
	stop()
	bin := buildStratafs(t)
	asOf := filepath.Join(base, "as-of")
	if err := os.Mkdir(asOf, 0o755); err != nil {
		t.Fatal(err)
	}
	instant := at[last].In(east).Format(time.RFC3339Nano)
	p := startMount(t, bin, base, asOf, "--as-of", instant)
	check("mount --as-of "+instant, asOf, steps[last])
	fuseWantErrno(t, "create in mount --as-of", os.WriteFile(filepath.Join(asOf, "new"), nil, 0o644), syscall.EROFS)
	fuseWantErrno(t, "unlink in mount --as-of", os.Remove(filepath.Join(asOf, file)), syscall.EROFS)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("stratafs mount --as-of after SIGTERM: %v", err)
	}
}

// openWrite opens name for writing and closes it.
func openWrite(name string) error {
	f, err := os.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// syncMount waits until the changes made in the mount on dir so far are
// committed: fsync of a directory waits for them all.
func syncMount(t *testing.T, dir string) {
	t.Helper()
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of %s: %v", dir, err)
	}
}

// TestFUSESnapshotsPageThroughBigDirectories lists a directory of a view
// bigger than a page of the store's listing, before and after most of it
// was deleted, in small batches so that the kernel asks again and again.
func TestFUSESnapshotsPageThroughBigDirectories(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	const n = 2500
	apply := func(keys []string, op func(key string) error) {
		t.Helper()
		ch := make(chan string)
		var wg sync.WaitGroup
		for range 16 { // concurrent writes share bolt's group commits
			wg.Go(func() {
				for k := range ch {
					if err := op(k); err != nil {
						t.Error(err)
					}
				}
			})
		}
		for _, k := range keys {
			ch <- k
		}
		close(ch)
		wg.Wait()
	}
	var keys, deleted []string
	for i := range n {
		keys = append(keys, fmt.Sprintf("big/f%05d", i))
		if i%5 != 0 {
			deleted = append(deleted, keys[i])
		}
	}
	before := timetest.LastStamp()
	apply(keys, func(k string) error {
		_, err := f.svc.Put(f.ctx, "bkt", k, strings.NewReader(k), object.PutOptions{Size: int64(len(k))})
		return err
	})
	full := timetest.LastStamp()
	apply(deleted, func(k string) error {
		_, err := f.svc.Delete(f.ctx, "bkt", k, object.DeleteOptions{})
		return err
	})

	list := func(instant time.Time) []string {
		t.Helper()
		d, err := os.Open(f.path(".snapshots/" + instant.Format(time.RFC3339Nano) + "/big"))
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		var names []string
		for {
			ents, err := d.ReadDir(100)
			for _, e := range ents {
				names = append(names, "big/"+e.Name())
			}
			if err == io.EOF {
				return names
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := list(full); !slices.Equal(got, keys) {
		t.Errorf("the full directory lists %d names, want %d", len(got), len(keys))
	}
	left := slices.DeleteFunc(slices.Clone(keys), func(k string) bool { _, found := slices.BinarySearch(deleted, k); return found })
	if got := list(timetest.LastStamp()); !slices.Equal(got, left) {
		t.Errorf("after the deletes the directory lists %d names, want %d", len(got), len(left))
	}
	_, err := os.Stat(f.path(".snapshots/" + before.Format(time.RFC3339Nano) + "/big"))
	fuseWantErrno(t, "the directory before its first key", err, syscall.ENOENT)
}
