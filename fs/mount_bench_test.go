package fs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/internal/cputime"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
)

// These benchmarks run one metadata operation of `make bench`'s FUSE
// figures on a real mount over the default stores, the FUSE server in the
// test's process: with -cpuprofile they show what the server spends per
// operation, which the figures of a busy machine hide in noise. They need
// /dev/fuse and root.

// benchMount mounts a new versioned bucket under a temporary directory
// and returns the mount point; remount makes the kernel forget what it
// cached by mounting the bucket again.
func benchMount(b *testing.B) (dir string, remount func()) {
	if os.Geteuid() != 0 {
		b.Skip("mounting needs root")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skip(err)
	}
	ctx := context.Background()
	tmp := b.TempDir()
	ms, err := bolt.Open(filepath.Join(tmp, "meta.db"))
	if err != nil {
		b.Fatal(err)
	}
	chunks, err := local.Open(tmp, local.Options{})
	if err != nil {
		b.Fatal(err)
	}
	svc := object.New(ms, chunks, object.Options{})
	if _, err := svc.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	if _, err := svc.SetVersioning(ctx, "bench", meta.Enabled); err != nil {
		b.Fatal(err)
	}
	dir = filepath.Join(tmp, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	mount := func() *fs.MountPoint {
		m, err := fs.Mount(ctx, svc, "bench", dir, fs.Options{
			StagingDir: filepath.Join(tmp, "staging"), Umask: 0o022,
			EntryTimeout: time.Second, AttrTimeout: time.Second,
		})
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	m := mount()
	b.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			b.Error(err)
		}
		chunks.Close()
		ms.Close()
	})
	return dir, func() {
		if err := m.Unmount(); err != nil {
			b.Fatal(err)
		}
		m = mount()
	}
}

var block = make([]byte, 4096)

func benchName(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("f%07d", i)) }

// renamed is the name a file of benchName is renamed to: after every
// name of benchName in listing order, as in `make bench`, so that lookups
// of the old and the new names make two walks of the directory.
func renamed(dir string, i int) string { return filepath.Join(dir, fmt.Sprintf("g%07d", i)) }

// create makes n files of 4 KiB in dir.
func create(b *testing.B, dir string, n int) {
	for i := range n {
		if err := os.WriteFile(benchName(dir, i), block, 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMountCreate(b *testing.B) {
	dir, _ := benchMount(b)
	cputime.PerOp(b)
	create(b, dir, b.N)
}

func BenchmarkMountStat(b *testing.B) {
	dir, remount := benchMount(b)
	create(b, dir, b.N)
	remount()
	cputime.PerOp(b)
	for i := range b.N {
		if _, err := os.Lstat(benchName(dir, i)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMountRename(b *testing.B) {
	dir, _ := benchMount(b)
	create(b, dir, b.N)
	cputime.PerOp(b)
	for i := range b.N {
		if err := os.Rename(benchName(dir, i), renamed(dir, i)); err != nil {
			b.Fatal(err)
		}
	}
}

// loopbackMount mounts go-fuse's loopback of a temporary directory with
// the options `make bench` gives it; remount is as for benchMount.
func loopbackMount(b *testing.B) (dir string, remount func()) {
	tmp := b.TempDir()
	src, dir := filepath.Join(tmp, "src"), filepath.Join(tmp, "mnt")
	for _, d := range []string{src, dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	timeout := time.Second
	mount := func() *fuse.Server {
		root, err := fusefs.NewLoopbackRoot(src)
		if err != nil {
			b.Fatal(err)
		}
		s, err := fusefs.Mount(dir, root, &fusefs.Options{
			MountOptions: fuse.MountOptions{Options: []string{"default_permissions"}, DirectMount: true, MaxWrite: 1 << 20},
			EntryTimeout: &timeout, AttrTimeout: &timeout, NegativeTimeout: &timeout, NullPermissions: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	s := mount()
	b.Cleanup(func() { s.Unmount() })
	return dir, func() {
		if err := s.Unmount(); err != nil {
			b.Fatal(err)
		}
		s = mount()
	}
}

// BenchmarkVsLoopback runs each operation on a stratafs mount and on a
// go-fuse loopback mount in turns of a hundred, so that the load of a
// shared machine falls on both alike, and reports stratafs's rate as a
// share of the loopback's (the "ratio" metric; ns/op is per operation on
// both).
func BenchmarkVsLoopback(b *testing.B) {
	const turn = 100
	for _, op := range []struct {
		name  string
		setup func(dir string, n int, remount func())
		run   func(dir string, i int) error
	}{
		{"create", nil, func(dir string, i int) error { return os.WriteFile(benchName(dir, i), block, 0o644) }},
		{"stat", func(dir string, n int, remount func()) { create(b, dir, n); remount() }, func(dir string, i int) error {
			_, err := os.Lstat(benchName(dir, i))
			return err
		}},
		{"rename", func(dir string, n int, _ func()) { create(b, dir, n) }, func(dir string, i int) error {
			return os.Rename(benchName(dir, i), renamed(dir, i))
		}},
	} {
		b.Run(op.name, func(b *testing.B) {
			dirs, remounts := make([]string, 2), make([]func(), 2)
			dirs[0], remounts[0] = benchMount(b)
			dirs[1], remounts[1] = loopbackMount(b)
			if op.setup != nil {
				for k := range dirs {
					op.setup(dirs[k], b.N, remounts[k])
				}
			}
			b.ResetTimer()
			var spent [2]time.Duration
			for start := 0; start < b.N; start += turn {
				for k := range dirs {
					t := time.Now()
					for i := start; i < min(start+turn, b.N); i++ {
						if err := op.run(dirs[k], i); err != nil {
							b.Fatal(err)
						}
					}
					spent[k] += time.Since(t)
				}
			}
			b.ReportMetric(float64(spent[1])/float64(spent[0]), "ratio")
		})
	}
}
