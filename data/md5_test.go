package data_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

// Bodies written while data.SIMDAfter others are in flight are hashed by
// md5-simd, and must get crypto/md5's sums.
func TestWriteMD5SIMD(t *testing.T) { writeMD5s(t) }

// md5Sizes are around MD5's 64-byte blocks, the inline limit, 64 KiB
// chunks and 256 KiB pieces, and a few MiB.
var md5Sizes = []int{
	0, 1, 63, 64, 65, 4095, 4096, 4097,
	64<<10 - 1, 64 << 10, 64<<10 + 1,
	256<<10 - 1, 256 << 10, 256<<10 + 1, 512<<10 + 1,
	3<<20 + 5,
}

// writeMD5s writes bodies of every md5Sizes, in 64 KiB chunks and not
// inline and then with the defaults, from 8 goroutines at once, while
// data.SIMDAfter other bodies are in flight. Each must have the MD5
// crypto/md5 gives it, and each that is not inline must have been hashed
// by md5-simd.
func writeMD5s(t *testing.T) {
	t.Helper()
	release := hold(t, data.SIMDAfter)
	defer release()
	opts := []data.WriteOptions{{ChunkSize: testChunk, InlineMax: -1}, {}}
	served := data.SIMDServed()
	hashed := 0
	for _, o := range opts {
		for _, n := range md5Sizes {
			if o.InlineMax < 0 || n > data.DefaultInlineMax {
				hashed++
			}
		}
	}
	const workers = 8
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 2))
			for _, i := range rng.Perm(len(opts) * len(md5Sizes)) {
				o, n := opts[i/len(md5Sizes)], md5Sizes[i%len(md5Sizes)]
				b := storetest.Random(rng.Uint64(), n)
				w, err := data.Write(context.Background(), newMem(), bytes.NewReader(b), o)
				if err != nil {
					t.Errorf("%d bytes, %+v: %v", n, o, err)
				} else if sum := md5.Sum(b); !bytes.Equal(w.Sum, sum[:]) {
					t.Errorf("%d bytes, %+v: MD5 %x, want %x", n, o, w.Sum, sum)
				}
			}
		})
	}
	wg.Wait()
	if got, want := data.SIMDServed()-served, workers*hashed; got != want {
		t.Errorf("%d bodies hashed by md5-simd, want %d", got, want)
	}
}

// hold starts n Writes whose bodies stall after 8 KiB and returns once
// they are all being hashed. release ends their bodies, waits for them and
// checks their MD5s; it may be called again.
func hold(t *testing.T, n int) (release func()) {
	t.Helper()
	start := data.Hashing()
	var wg sync.WaitGroup
	pws := make([]*io.PipeWriter, n)
	for i := range pws {
		pr, pw := io.Pipe()
		pws[i] = pw
		b := storetest.Random(uint64(i), 8<<10)
		go func() { _, _ = pw.Write(b) }()
		wg.Go(func() {
			w, err := data.Write(context.Background(), newMem(), pr, data.WriteOptions{})
			if sum := md5.Sum(b); err != nil || !bytes.Equal(w.Sum, sum[:]) {
				t.Errorf("held body: %v, %v", w, err)
			}
		})
	}
	release = sync.OnceFunc(func() {
		for _, pw := range pws {
			pw.Close()
		}
		wg.Wait()
	})
	for deadline := time.Now().Add(10 * time.Second); data.Hashing() < start+int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			release()
			t.Fatalf("%d bodies being hashed, want %d", data.Hashing(), start+int64(n))
		}
	}
	return release
}

// Failed Writes give their md5-simd hashers back, whatever fails: the
// servers they came from close, and later Writes still hash correctly.
func TestWriteMD5Fails(t *testing.T) {
	release := hold(t, data.SIMDAfter)
	defer release()
	served := data.SIMDServed()
	b := storetest.Random(1, 3*testChunk+5)
	fails := []func() error{
		func() error { // a Put
			s := newMem()
			s.failPut = 2
			_, err := data.Write(context.Background(), s, bytes.NewReader(b), data.WriteOptions{ChunkSize: testChunk})
			return err
		},
		func() error { // a chunk writer
			s := newMem()
			s.failWrite = 2
			_, err := data.Write(context.Background(), streamMem{s}, bytes.NewReader(b), data.WriteOptions{ChunkSize: testChunk})
			return err
		},
		func() error { // the body
			body := io.MultiReader(bytes.NewReader(b), iotest.ErrReader(io.ErrUnexpectedEOF))
			_, err := data.Write(context.Background(), newMem(), body, data.WriteOptions{ChunkSize: testChunk})
			return err
		},
		func() error { // the context
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			body := &cancelAfter{r: bytes.NewReader(b), n: 2 * testChunk, cancel: cancel}
			_, err := data.Write(ctx, newMem(), body, data.WriteOptions{ChunkSize: testChunk})
			return err
		},
	}
	// Enough to go through several servers.
	const workers, each = 8, 40
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range each {
				if err := fails[(g+i)%len(fails)](); err == nil {
					t.Errorf("failure %d: Write succeeded", (g+i)%len(fails))
				}
			}
		})
	}
	wg.Wait()
	release()
	if got := data.SIMDServed() - served; got != workers*each {
		t.Errorf("%d failed bodies hashed by md5-simd, want %d", got, workers*each)
	}
	if n := data.Hashing(); n != 0 {
		t.Errorf("%d bodies still being hashed", n)
	}
	// Only the current server may be left.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := simdServers()
		if n <= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d md5-simd servers running, want at most 1", n)
		}
	}
	writeMD5s(t)
}

// simdServers counts the goroutines md5-simd servers run in.
func simdServers() int {
	var b strings.Builder
	if err := pprof.Lookup("goroutine").WriteTo(&b, 2); err != nil {
		panic(fmt.Sprint("goroutine profile: ", err))
	}
	return strings.Count(b.String(), "md5Server).process(")
}
