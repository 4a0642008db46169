package data_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/storetest"
)

var errInjected = errors.New("injected failure")

// memStore is an in-memory data.Store with the knobs the tests need.
type memStore struct {
	failPut  int           // when > 0, the failPut-th Put fails
	putDelay time.Duration // each Put sleeps this long, deaf to its context
	onPut    func([]byte)  // called by each Put; the chunk is then dropped

	puts    atomic.Int32 // Puts started
	running atomic.Int32 // Puts not yet returned

	failWrite int          // when > 0, the failWrite-th chunk writer Write fails
	writes    atomic.Int32 // chunk writer Writes
	writers   atomic.Int32 // chunk writers neither committed nor aborted

	mu     sync.Mutex
	chunks map[data.ChunkID][]byte
}

func newMem() *memStore { return &memStore{chunks: map[data.ChunkID][]byte{}} }

func (s *memStore) Put(ctx context.Context, id data.ChunkID, b []byte) error {
	s.running.Add(1)
	defer s.running.Add(-1)
	if int(s.puts.Add(1)) == s.failPut {
		return fmt.Errorf("put chunk %s: %w", id, errInjected)
	}
	time.Sleep(s.putDelay)
	if s.onPut != nil {
		s.onPut(b)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks[id] = bytes.Clone(b)
	return nil
}

func (s *memStore) ReadAt(ctx context.Context, id data.ChunkID, p []byte, off int64) (int, error) {
	s.mu.Lock()
	b, ok := s.chunks[id]
	s.mu.Unlock()
	if !ok {
		return 0, fmt.Errorf("chunk %s: %w", id, data.ErrNoSuchChunk)
	}
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (s *memStore) Delete(ctx context.Context, id data.ChunkID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.chunks, id)
	return nil
}

func (s *memStore) Walk(ctx context.Context, fn func(data.ChunkID, int64, time.Time) error) error {
	s.mu.Lock()
	ids := make(map[data.ChunkID]int64, len(s.chunks))
	for id, b := range s.chunks {
		ids[id] = int64(len(b))
	}
	s.mu.Unlock()
	for id, size := range ids {
		if err := fn(id, size, time.Now()); err != nil {
			return err
		}
	}
	return nil
}

func (s *memStore) Close() error { return nil }

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.chunks)
}

// streamMem is a memStore taken as a StreamStore: its chunk writers
// gather a chunk and Put it on Commit.
type streamMem struct{ *memStore }

func (s streamMem) CreateChunk(id data.ChunkID) (data.ChunkWriter, error) {
	s.writers.Add(1)
	return &memChunk{s: s.memStore, id: id}, nil
}

type memChunk struct {
	s    *memStore
	id   data.ChunkID
	b    []byte
	done bool
}

func (c *memChunk) Write(b []byte) (int, error) {
	if int(c.s.writes.Add(1)) == c.s.failWrite {
		return 0, fmt.Errorf("write chunk %s: %w", c.id, errInjected)
	}
	c.b = append(c.b, b...)
	return len(b), nil
}

func (c *memChunk) Commit(ctx context.Context) error {
	c.end()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("put chunk %s: %w", c.id, err)
	}
	return c.s.Put(ctx, c.id, c.b)
}

func (c *memChunk) Abort() { c.end() }

func (c *memChunk) end() {
	if !c.done {
		c.done = true
		c.s.writers.Add(-1)
	}
}

// kinds are the two ways Write stores chunks: whole, by Put, and as they
// arrive, to a StreamStore's chunk writers.
var kinds = []struct {
	name string
	of   func(*memStore) data.Store
}{
	{"put", func(s *memStore) data.Store { return s }},
	{"stream", func(s *memStore) data.Store { return streamMem{s} }},
}

// The fake must keep the contract the real stores keep, or the tests
// below prove nothing.
func TestMemStoreContract(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			storetest.Run(t, func(*testing.T) data.Store { return k.of(newMem()) })
		})
	}
}

// chunked stores b in s behind a manifest of ranges of random length, each
// a range of a larger stored chunk padded with junk on both sides, so that
// any mistake with chunk offsets shows in the bytes.
func chunked(t *testing.T, s data.Store, rng *rand.Rand, b []byte) *data.Manifest {
	t.Helper()
	m := &data.Manifest{Size: int64(len(b))}
	for off := 0; off < len(b); {
		n := min(1+rng.IntN(3000), len(b)-off)
		pre, post := rng.IntN(50), rng.IntN(50)
		stored := make([]byte, pre+n+post)
		for i := range stored {
			stored[i] = byte(rng.Uint32())
		}
		copy(stored[pre:], b[off:off+n])
		id := data.NewChunkID()
		if err := s.Put(context.Background(), id, stored); err != nil {
			t.Fatal(err)
		}
		m.Chunks = append(m.Chunks, &data.Chunk{Id: id[:], Offset: int64(pre), Length: int64(n)})
		off += n
	}
	return m
}

// contents checks that m is valid and returns its bytes, read both by
// NewReader and by ReaderAt.
func contents(t *testing.T, s data.Store, m *data.Manifest) []byte {
	t.Helper()
	enc, err := data.EncodeManifest(m)
	if err != nil {
		t.Fatalf("invalid manifest: %v", err)
	}
	if _, err := data.DecodeManifest(enc); err != nil {
		t.Fatalf("manifest does not decode: %v", err)
	}
	r := data.NewReader(context.Background(), s, m, 0, -1)
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	p := make([]byte, m.Size)
	if n, err := data.NewReaderAt(s, m).ReadAt(context.Background(), p, 0); n != len(p) || err != nil {
		t.Fatalf("ReadAt = %d, %v; want %d, nil", n, err, len(p))
	}
	if !bytes.Equal(b, p) {
		t.Fatal("NewReader and ReaderAt disagree")
	}
	return b
}
