package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// The FUSE figures run the same workloads, in the same run and on the
// same disk, on four trees: a stratafs mount; a go-fuse loopback mount,
// mounted with the options stratafs uses so that the ratio compares the
// file systems and not their options; the bare disk, for scale; and the
// same loopback with its files served by its FUSE server ("served").
// Each file system is served by a process of its own, as `stratafs mount`
// is, and the workloads' system calls come from this one.
//
// As root on Linux 6.9 or later, go-fuse's loopback hands every open file
// to the kernel (FUSE_PASSTHROUGH): its reads and writes then never reach
// the FUSE server, so they run at the disk's speed. A file system whose
// files are not each one local file cannot do that, and no FUSE file
// system's bytes can go faster through FUSE than a server that passes
// them on: the target of the figures that write or read bytes, the
// sequential ones and create (open, write 4 KiB, close), is the ratio to
// "served", the floor for bytes that go through FUSE; the ratio to the
// passthrough loopback is printed beside it, with no target. Passthrough
// spares the loopback one request of a create's seven, the WRITE
// (LOOKUP, CREATE, GETXATTR, FLUSH, RELEASE and the directory's GETATTR
// remain): 15 % of its server's CPU per create in a run of 2026-12-05
// (108 against 127 µs). It changes nothing of stat, readdir, rename and
// unlink, which open no file: their target is the ratio to the loopback,
// and their ratio to "served" is printed beside it. Every workload runs
// in rounds, each on every tree in turn (in an order that rotates), and
// each tree's best round is kept, so that a burst of load from elsewhere
// on the machine does not decide a ratio.

// fuseTimeout is the entry and attribute timeout of both mounts, the
// default of `stratafs mount`.
const fuseTimeout = time.Second

// How many times each workload runs on each tree: a metadata round
// takes a second or less, and on a shared 2-core VM the loopback and
// the served loopback, which run the same code for them, came out up to
// 40 % apart as the best of 3.
const (
	metaRounds = 5
	seqRounds  = 3
)

// A fuseTree is where one column of the FUSE figures runs.
type fuseTree struct {
	name string
	dir  string
	// forget makes the kernel forget what it cached about the tree (its
	// names, attributes and pages) by mounting it again; nil for the
	// disk, which has no such cache of its own.
	forget func()
	// cpu is the CPU time the tree's FUSE server has used so far; nil for
	// the disk. Wall-clock ratios of two servers swing by tens of percent
	// from run to run on a shared 2-core VM; their CPU per operation
	// swings far less, and shows work that runs beside the requests
	// (stratafs's journal commits).
	cpu   func() time.Duration
	close func()
}

// fuseFigures prints the FUSE figures; scratch is on the disk measured.
func fuseFigures(w *tabwriter.Writer, scratch string) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		fmt.Fprintf(w, "fuse\tskipped: /dev/fuse is missing (%v)\t\t\t\n", err)
		return
	}
	// files is how many files each round of the metadata figures makes,
	// stats, renames and removes. With 2,000 a round of 4-thread stats
	// took 40–50 ms, and the ratio of two runs of the same code ranged
	// 0.65–1.21; with 6,000 a round takes long enough for the servers'
	// CPU per operation, not the moment, to decide it.
	files, big := 6000, int64(1<<30)
	if *quick {
		files, big = 300, 64<<20
	}
	trees := []*fuseTree{childTree("stratafs", scratch), childTree("loopback", scratch), diskTree(scratch), childTree("served", scratch)}
	defer func() {
		for _, t := range trees {
			t.close()
		}
	}()
	forget := func() {
		for _, t := range trees {
			if t.forget != nil {
				t.forget()
			}
		}
	}
	// every runs a workload's rounds on every tree, prints each tree's
	// best round and its server's CPU per unit of work in that round
	// (unit is a rate: "files/s" is per file), stratafs's ratio to base
	// (the loopback or the served one) with the target, and its ratio to
	// the other loopback beside it. run gets the round's number.
	const loopback, served = 1, 3
	every := func(base, rounds int, fig, unit, target string, run func(t *fuseTree, round int) float64) {
		// A trial is a tree's round: its rate, and its server's CPU per
		// unit of work.
		type trial struct{ rate, cpu float64 }
		runs := make([]func(int) trial, len(trees))
		for i, t := range trees {
			runs[i] = func(r int) trial {
				// What the previous run left dirty is written back now,
				// not during this one.
				syscall.Sync()
				var c0 time.Duration
				if t.cpu != nil {
					c0 = t.cpu()
				}
				start := time.Now()
				f := run(t, r)
				if t.cpu == nil {
					return trial{rate: f}
				}
				return trial{f, float64((t.cpu() - c0).Microseconds()) / (f * time.Since(start).Seconds())}
			}
		}
		best := bestOf(rounds, func(t trial) float64 { return t.rate }, runs...)
		// "files/s" is per file, "entries/s" per entry, "MiB/s" per MiB.
		per := strings.TrimSuffix(unit, "/s")
		if p, ok := strings.CutSuffix(per, "ies"); ok {
			per = p + "y"
		} else if per != "MiB" {
			per = strings.TrimSuffix(per, "s")
		}
		for i, t := range trees {
			fmt.Fprintf(w, "fuse:%s\t%s\t%.0f\t%s\t\n", t.name, fig, best[i].rate, unit)
			if t.cpu != nil {
				fmt.Fprintf(w, "fuse:%s\t%s: server CPU\t%.1f\tµs/%s\t\n", t.name, fig, best[i].cpu, per)
			}
		}
		ratio := func(i int, label string) {
			fmt.Fprintf(w, "fuse\t%s: stratafs ÷ %s\t%.2f\t×\t\n", fig, label, best[0].rate/best[i].rate)
		}
		if base == served {
			ratio(served, "served loopback (target "+target+")")
			ratio(loopback, "passthrough loopback (no target: its file bytes bypass FUSE)")
		} else {
			ratio(loopback, "loopback (target "+target+")")
			ratio(served, "served loopback (no target; shows what passthrough changes)")
		}
	}
	each := func(fig, unit, target string, run func(t *fuseTree, round int) float64) {
		every(loopback, metaRounds, fig, unit, target, run)
	}
	block := make([]byte, 4096)
	_, err := rand.Read(block)
	check(err)
	threads := []int{1, 4}
	// Each round of each thread count has a directory of its own files.
	dirOf := func(t *fuseTree, threads, round int) string {
		return filepath.Join(t.dir, fmt.Sprintf("t%d-%d", threads, round))
	}
	name := func(t *fuseTree, threads, round int, prefix string, i int) string {
		return filepath.Join(dirOf(t, threads, round), fmt.Sprintf("%s%06d", prefix, i))
	}

	for _, n := range threads {
		every(served, metaRounds, fmt.Sprintf("create (open-write 4 KiB-close), %d thread(s)", n), "files/s", "≥ 0.90", func(t *fuseTree, r int) float64 {
			check(os.Mkdir(dirOf(t, n, r), 0o755))
			return rate(files, n, func(i int) { check(os.WriteFile(name(t, n, r, "f", i), block, 0o644)) })
		})
	}
	// Each stat below is the first the kernel sees of its name.
	forget()
	for _, n := range threads {
		each(fmt.Sprintf("stat, %d thread(s)", n), "stats/s", "≥ 1", func(t *fuseTree, r int) float64 {
			return rate(files, n, func(i int) {
				_, err := os.Lstat(name(t, n, r, "f", i))
				check(err)
			})
		})
	}
	for _, n := range threads {
		each(fmt.Sprintf("readdir, %d thread(s)", n), "entries/s", "≥ 1", func(t *fuseTree, r int) float64 {
			return float64(files) * rate(4*n, n, func(int) {
				ents, err := os.ReadDir(dirOf(t, 1, r))
				check(err)
				if len(ents) != files {
					check(fmt.Errorf("%s: readdir found %d entries, want %d", t.name, len(ents), files))
				}
			})
		})
	}
	for _, n := range threads {
		each(fmt.Sprintf("rename, %d thread(s)", n), "renames/s", "≥ 0.90", func(t *fuseTree, r int) float64 {
			return rate(files, n, func(i int) { check(os.Rename(name(t, n, r, "f", i), name(t, n, r, "g", i))) })
		})
	}
	for _, n := range threads {
		each(fmt.Sprintf("unlink, %d thread(s)", n), "unlinks/s", "≥ 0.90", func(t *fuseTree, r int) float64 {
			return rate(files, n, func(i int) { check(os.Remove(name(t, n, r, "g", i))) })
		})
	}

	mib := float64(big) / (1 << 20)
	bigName := func(t *fuseTree, r int) string { return filepath.Join(t.dir, fmt.Sprintf("big-%d", r)) }
	every(served, seqRounds, fmt.Sprintf("sequential write of %.0f MiB + fsync", mib), "MiB/s", "≥ 0.80", func(t *fuseTree, r int) float64 {
		start := time.Now()
		writeSeq(bigName(t, r), big)
		return mib / time.Since(start).Seconds()
	})
	forget() // the reads below come through the file system, not the kernel's cache of it
	every(served, seqRounds, fmt.Sprintf("sequential read of %.0f MiB", mib), "MiB/s", "≥ 0.80", func(t *fuseTree, r int) float64 {
		start := time.Now()
		readSeq(bigName(t, r), big)
		return mib / time.Since(start).Seconds()
	})
}

// seqBlock is the size of each write and read of the sequential figures.
const seqBlock = 1 << 20

// writeSeq writes size bytes to a new file at p in seqBlock writes and
// fsyncs it: every tree ends with the bytes on disk.
func writeSeq(p string, size int64) {
	f, err := os.Create(p)
	check(err)
	buf := make([]byte, seqBlock)
	_, err = rand.Read(buf)
	check(err)
	for off := int64(0); off < size; off += seqBlock {
		_, err := f.Write(buf[:min(seqBlock, size-off)])
		check(err)
	}
	check(f.Sync())
	check(f.Close())
}

// readSeq reads the file at p to its end in seqBlock reads.
func readSeq(p string, size int64) {
	f, err := os.Open(p)
	check(err)
	defer f.Close()
	n, err := discard(f, make([]byte, seqBlock))
	check(err)
	if n != size {
		check(fmt.Errorf("read %d bytes of %s, want %d", n, p, size))
	}
}

// forgetCommand asks a FUSE tree's process to forget what the kernel
// cached of it (see fuseTree.forget).
const forgetCommand = "forget"

// childTree runs the FUSE tree kind ("stratafs", "loopback" or "served")
// in a process of its own (see child).
func childTree(kind, scratch string) *fuseTree {
	c := startChild(kind, scratch)
	return &fuseTree{name: kind, dir: c.hello, forget: func() { c.ask(forgetCommand) }, cpu: c.cpu, close: c.stop}
}

// serveFUSE is the process of a FUSE tree: its first line is the mount
// point.
func serveFUSE(kind, scratch string) {
	var t *fuseTree
	switch kind {
	case "stratafs":
		t = stratafsTree(scratch)
	case "loopback", "served":
		t = loopbackTree(scratch, kind == "served")
	default:
		check(fmt.Errorf("no FUSE tree %q", kind))
	}
	defer t.close()
	serveLines(t.dir, map[string]func() string{forgetCommand: func() string {
		t.forget()
		return "ok"
	}})
}

// stratafsTree mounts a versioned bucket over the embedded default stores
// (bolt and local chunks) under scratch, as `stratafs mount` does.
func stratafsTree(scratch string) *fuseTree {
	ctx := context.Background()
	data := filepath.Join(scratch, "stratafs")
	ms, err := bolt.Open(data + ".db")
	check(err)
	chunks, err := local.Open(data, local.Options{DirectIO: *direct})
	check(err)
	svc := object.New(ms, chunks, object.Options{})
	_, err = svc.CreateBucket(ctx, "bench", "")
	check(err)
	_, err = svc.SetVersioning(ctx, "bench", meta.Enabled)
	check(err)
	t := &fuseTree{name: "stratafs", dir: filepath.Join(scratch, "mnt-stratafs")}
	check(os.Mkdir(t.dir, 0o755))
	mount := func() *fs.MountPoint {
		m, err := fs.Mount(ctx, svc, "bench", t.dir, fs.Options{
			StagingDir:   filepath.Join(data, "staging"),
			UID:          uint32(os.Getuid()),
			GID:          uint32(os.Getgid()),
			Umask:        0o022,
			EntryTimeout: fuseTimeout,
			AttrTimeout:  fuseTimeout,
		})
		check(err)
		return m
	}
	m := mount()
	t.forget = func() {
		check(m.Unmount())
		m = mount()
	}
	t.close = func() {
		check(m.Unmount())
		check(chunks.Close())
		check(ms.Close())
	}
	return t
}

// loopbackTree mounts a go-fuse passthrough of a directory under scratch;
// served keeps the kernel from reading and writing its files itself.
func loopbackTree(scratch string, served bool) *fuseTree {
	name := "loopback"
	if served {
		name = "served"
	}
	src := filepath.Join(scratch, name)
	t := &fuseTree{name: name, dir: filepath.Join(scratch, "mnt-"+name)}
	check(os.Mkdir(src, 0o755))
	check(os.Mkdir(t.dir, 0o755))
	timeout := fuseTimeout
	opts := &fusefs.Options{
		MountOptions: fuse.MountOptions{
			FsName:      name + ":" + src,
			Name:        "loopback",
			Options:     []string{"default_permissions"},
			DirectMount: os.Geteuid() == 0,
			MaxWrite:    1 << 20,
		},
		EntryTimeout:    &timeout,
		AttrTimeout:     &timeout,
		NegativeTimeout: &timeout,
		NullPermissions: true,
	}
	mount := func() *fuse.Server {
		root, err := fusefs.NewLoopbackRoot(src)
		check(err)
		if served {
			n := &servedNode{root.(*fusefs.LoopbackNode)}
			n.RootData.RootNode = n
			root = n
		}
		s, err := fusefs.Mount(t.dir, root, opts)
		check(err)
		return s
	}
	s := mount()
	unmount := func() {
		check(s.Unmount())
		s.Wait()
	}
	t.forget = func() {
		unmount()
		s = mount()
	}
	t.close = unmount
	return t
}

// diskTree is a plain directory under scratch.
func diskTree(scratch string) *fuseTree {
	t := &fuseTree{name: "disk", dir: filepath.Join(scratch, "disk"), close: func() {}}
	check(os.Mkdir(t.dir, 0o755))
	return t
}

// A servedNode is a loopback node whose files are read and written
// through the FUSE server: their handles do not offer the kernel their
// file descriptors (fusefs.FilePassthroughFder).
type servedNode struct{ *fusefs.LoopbackNode }

var (
	_ = (fusefs.NodeWrapChilder)((*servedNode)(nil))
	_ = (fusefs.NodeOpener)((*servedNode)(nil))
	_ = (fusefs.NodeCreater)((*servedNode)(nil))
)

func (n *servedNode) WrapChild(ctx context.Context, ops fusefs.InodeEmbedder) fusefs.InodeEmbedder {
	return &servedNode{ops.(*fusefs.LoopbackNode)}
}

func (n *servedNode) Open(ctx context.Context, flags uint32) (fusefs.FileHandle, uint32, syscall.Errno) {
	fh, fl, errno := n.LoopbackNode.Open(ctx, flags)
	return servedHandle(fh), fl, errno
}

func (n *servedNode) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fusefs.Inode, fusefs.FileHandle, uint32, syscall.Errno) {
	in, fh, fl, errno := n.LoopbackNode.Create(ctx, name, flags, mode, out)
	return in, servedHandle(fh), fl, errno
}

// servedFile passes on the calls of a loopback file handle the figures
// make, and no others.
type servedFile struct{ fh fusefs.FileHandle }

func servedHandle(fh fusefs.FileHandle) fusefs.FileHandle {
	if fh == nil {
		return nil
	}
	return servedFile{fh}
}

func (f servedFile) Read(ctx context.Context, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	return f.fh.(fusefs.FileReader).Read(ctx, dest, off)
}

func (f servedFile) Write(ctx context.Context, data []byte, off int64) (uint32, syscall.Errno) {
	return f.fh.(fusefs.FileWriter).Write(ctx, data, off)
}

func (f servedFile) Flush(ctx context.Context) syscall.Errno {
	return f.fh.(fusefs.FileFlusher).Flush(ctx)
}

func (f servedFile) Fsync(ctx context.Context, flags uint32) syscall.Errno {
	return f.fh.(fusefs.FileFsyncer).Fsync(ctx, flags)
}

func (f servedFile) Release(ctx context.Context) syscall.Errno {
	return f.fh.(fusefs.FileReleaser).Release(ctx)
}

func (f servedFile) Getattr(ctx context.Context, out *fuse.AttrOut) syscall.Errno {
	return f.fh.(fusefs.FileGetattrer).Getattr(ctx, out)
}

func (f servedFile) Setattr(ctx context.Context, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return f.fh.(fusefs.FileSetattrer).Setattr(ctx, in, out)
}
