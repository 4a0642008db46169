package integration

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stratafs/stratafs/fs"
)

// TestFUSEStreamedWrites covers how a file written from its start in
// order goes straight to the chunk store, and every way of leaving that
// path: the bytes, in the mount and in the store, and the versions made
// must be those of any other write.
func TestFUSEStreamedWrites(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	body := fuseRandom(3*fuseChunk + 17)
	// writeIn writes b to file at its offset in pieces, in order.
	writeIn := func(file *os.File, b []byte) {
		t.Helper()
		for len(b) > 0 {
			n := min(len(b), 1000)
			if _, err := file.Write(b[:n]); err != nil {
				t.Fatal(err)
			}
			b = b[n:]
		}
	}
	for _, c := range []struct {
		name     string
		versions int
		// write writes the file and returns what it must hold.
		write func(file *os.File) []byte
	}{
		{"in order", 1, func(file *os.File) []byte {
			writeIn(file, body)
			return body
		}},
		{"read back while written", 1, func(file *os.File) []byte {
			writeIn(file, body[:fuseChunk+5])
			got := make([]byte, 55)
			if _, err := file.ReadAt(got, fuseChunk-50); err != nil || !bytes.Equal(got, body[fuseChunk-50:fuseChunk+5]) {
				t.Errorf("read back: %v", err)
			}
			writeIn(file, body[fuseChunk+5:])
			return body
		}},
		{"a write before the end", 1, func(file *os.File) []byte {
			writeIn(file, body)
			if _, err := file.WriteAt([]byte("XYZ"), 5); err != nil {
				t.Fatal(err)
			}
			return append(append(append([]byte{}, body[:5]...), "XYZ"...), body[8:]...)
		}},
		{"a write past the end", 1, func(file *os.File) []byte {
			writeIn(file, body[:100])
			if _, err := file.WriteAt([]byte("far"), 2*fuseChunk); err != nil {
				t.Fatal(err)
			}
			return append(append(append([]byte{}, body[:100]...), make([]byte, 2*fuseChunk-100)...), "far"...)
		}},
		{"truncated while written", 1, func(file *os.File) []byte {
			writeIn(file, body)
			if err := file.Truncate(1000); err != nil {
				t.Fatal(err)
			}
			if _, err := file.WriteAt([]byte("tail"), 1000); err != nil {
				t.Fatal(err)
			}
			return append(append([]byte{}, body[:1000]...), "tail"...)
		}},
		{"fsynced half-way", 2, func(file *os.File) []byte {
			writeIn(file, body[:2*fuseChunk])
			if err := file.Sync(); err != nil {
				t.Fatal(err)
			}
			writeIn(file, body[2*fuseChunk:])
			return body
		}},
	} {
		name := "f-" + c.name
		file, err := os.Create(f.path(name))
		if err != nil {
			t.Fatal(err)
		}
		want := c.write(file)
		if err := file.Close(); err != nil {
			t.Fatalf("%s: close: %v", c.name, err)
		}
		if got := f.read(name); !bytes.Equal(got, want) {
			t.Errorf("%s: the mount reads %d bytes that differ from the %d written", c.name, len(got), len(want))
		}
		if got := f.stored(name); !bytes.Equal(got, want) {
			t.Errorf("%s: the store holds %d bytes that differ from the %d written", c.name, len(got), len(want))
		}
		if vs := f.versions(name); len(vs) != c.versions {
			t.Errorf("%s: %d versions, want %d", c.name, len(vs), c.versions)
		}
	}
	mountWritten(t, "a streamed file", f.head("f-in order"), body)
}

// TestFUSEManyWritersAtOnce writes more files at once than are streamed
// at once: the others are staged, and all end up right.
func TestFUSEManyWritersAtOnce(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	const writers = 10
	bodies := make([][]byte, writers)
	files := make([]*os.File, writers)
	for i := range writers {
		bodies[i] = fuseRandom(2*fuseChunk + i)
		file, err := os.Create(f.path(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		files[i] = file
	}
	// Every file is open and half written before any is closed.
	var wg sync.WaitGroup
	half := make(chan struct{})
	var halfway sync.WaitGroup
	halfway.Add(writers)
	for i := range writers {
		wg.Go(func() {
			b := bodies[i]
			if _, err := files[i].Write(b[:len(b)/2]); err != nil {
				t.Error(err)
			}
			halfway.Done()
			<-half
			if _, err := files[i].Write(b[len(b)/2:]); err != nil {
				t.Error(err)
			}
			if err := files[i].Close(); err != nil {
				t.Error(err)
			}
		})
	}
	halfway.Wait()
	close(half)
	wg.Wait()
	for i, b := range bodies {
		if got := f.stored(fmt.Sprint(i)); !bytes.Equal(got, b) {
			t.Errorf("file %d: the store holds %d bytes that differ from the %d written", i, len(got), len(b))
		}
	}
}

// fuseMemoryBound is how much the mount process's peak resident set may
// grow while a file bigger than it is written through the mount: the
// bytes stream to chunks through a window of three chunk buffers
// (data.Write), whatever the file's size.
const fuseMemoryBound = 64 << 20

// TestFUSEWriteMemory writes a file of 4·fuseMemoryBound through
// `stratafs mount` and measures the growth of the process's peak
// resident set.
func TestFUSEWriteMemory(t *testing.T) {
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary and writes 256 MiB")
	}
	bin := buildStratafs(t)
	data := t.TempDir()
	stratafs(t, bin, data, "bucket", "create", "bkt")
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	p := startMount(t, bin, data, mnt)
	pid := p.cmd.Process.Pid
	peak0, _ := procMemory(t, pid)
	file, err := os.Create(filepath.Join(mnt, "big"))
	if err != nil {
		t.Fatal(err)
	}
	block := fuseRandom(1 << 20)
	for range 4 * fuseMemoryBound >> 20 {
		if _, err := file.Write(block); err != nil {
			t.Fatal(err)
		}
	}
	if err := file.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := file.Close(); err != nil {
		t.Fatal(err)
	}
	peak1, _ := procMemory(t, pid)
	if grew := peak1 - peak0; grew > fuseMemoryBound {
		t.Errorf("writing %d MiB grew the mount's peak resident set by %d MiB, more than %d MiB",
			4*fuseMemoryBound>>20, grew>>20, fuseMemoryBound>>20)
	} else {
		t.Logf("writing %d MiB grew the mount's peak resident set by %d MiB", 4*fuseMemoryBound>>20, grew>>20)
	}
}
