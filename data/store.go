// Package data stores object bytes as immutable chunks and describes a
// version's bytes with a Manifest (the ordered chunk list). Chunks never
// change once written, so versions share them freely: copies, renames and
// metadata-only changes copy no bytes.
package data

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// A ChunkID names a chunk: 16 random bytes.
type ChunkID [16]byte

// NewChunkID returns a fresh random id.
func NewChunkID() ChunkID {
	var id ChunkID
	if _, err := rand.Read(id[:]); err != nil {
		panic(fmt.Sprintf("data: reading random bytes: %v", err))
	}
	return id
}

func (id ChunkID) String() string { return hex.EncodeToString(id[:]) }

// ParseChunkID parses the 32-character hex form.
func ParseChunkID(s string) (ChunkID, error) {
	var id ChunkID
	// Only the lowercase form String prints: one id, one spelling.
	if len(s) != 32 || strings.ToLower(s) != s {
		return id, fmt.Errorf("chunk id %q: %w", s, ErrCorrupt)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("chunk id %q: %w", s, ErrCorrupt)
	}
	return id, nil
}

var (
	// ErrNoSuchChunk means a manifest names a chunk the store does not hold.
	ErrNoSuchChunk = errors.New("no such chunk")
	// ErrCorrupt means stored bytes or a manifest failed validation.
	ErrCorrupt = errors.New("corrupt data")
	// ErrUnavailable means a remote chunk store could not be reached or
	// did not answer, after its retries: the operation may work later.
	// The front ends answer it as they answer meta.ErrUnavailable (S3
	// 503, EIO); data cannot use that one, since meta sits above data.
	ErrUnavailable = errors.New("chunk store unavailable")
)

// Store holds chunks. Implementations must be safe for concurrent use.
type Store interface {
	// Put stores b under id. When Put returns nil the chunk is durable:
	// it survives a crash, so a version row may now name it. Put must not
	// modify b or keep it after returning: writers reuse their buffers.
	Put(ctx context.Context, id ChunkID, b []byte) error
	// ReadAt reads len(p) bytes of chunk id starting at off, like
	// io.ReaderAt; ErrNoSuchChunk if the chunk is missing.
	ReadAt(ctx context.Context, id ChunkID, p []byte, off int64) (int, error)
	// Delete removes a chunk; deleting a missing chunk is not an error.
	Delete(ctx context.Context, id ChunkID) error
	// Walk calls fn for every stored chunk, in no particular order (for
	// the collector and fsck).
	Walk(ctx context.Context, fn func(id ChunkID, size int64, modified time.Time) error) error
	Close() error
}

// A FileStore is a Store that keeps each chunk in a file of the local file
// system. A reader may open a chunk's file and hand it to the kernel, which
// then moves the bytes itself (the FUSE mount splices them), rather than
// copy them through a buffer.
type FileStore interface {
	Store
	// OpenChunk opens the file of chunk id for reading; ErrNoSuchChunk if
	// the chunk is missing. The caller closes it.
	OpenChunk(id ChunkID) (*os.File, error)
}

// A StreamStore is a Store that takes a chunk's bytes as they arrive,
// rather than whole in a buffer: Write then streams a body to its chunks
// through a few small buffers instead of holding chunks in memory.
type StreamStore interface {
	Store
	// CreateChunk starts chunk id. Nothing may name it before its
	// writer's Commit returned nil.
	CreateChunk(id ChunkID) (ChunkWriter, error)
}

// A ChunkWriter receives one chunk's bytes, in order. Commit or Abort ends
// it; Abort after Commit does nothing. It need not be safe for concurrent
// use, but Commit may run on another goroutine than the Writes.
type ChunkWriter interface {
	// Write appends b to the chunk; it must not keep b. After an error
	// the writer is only good for Abort.
	io.Writer
	// Commit makes the chunk durable under its id, as a Put returning nil
	// does. On error the chunk does not exist and nothing of it is left
	// behind.
	Commit(ctx context.Context) error
	// Abort discards the chunk: nothing of it is left behind.
	Abort()
}
