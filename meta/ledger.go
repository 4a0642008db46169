package meta

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

// MaxLedgerBatch is the most chunks one call of a Ledger takes: backends
// keep a call to one small transaction or a few batches.
const MaxLedgerBatch = 1000

// A Condemned chunk is one the collector found referenced by no row and
// no upload part, as of Since. Chunk is the chunk's id (data.ChunkID).
type Condemned struct {
	Chunk [16]byte
	Since time.Time
}

// A Ledger keeps the chunks the collector condemned, in the meta store,
// where the collector of every process sharing it (several gateways on
// TiKV or Cassandra) finds them. A run of the collector deletes a chunk
// only when it finds it unreferenced and condemned by a run at least the
// grace period before; one that finds it unreferenced and not condemned
// condemns it; one that finds a condemned chunk referenced again (a copy
// or an undelete shared it) pardons it. So a chunk is deleted no sooner
// than the grace period after a run first saw it unreferenced, whichever
// process ran it: a reader in any process, which keeps reading the
// version it opened after that version's row is removed, has at least
// that long.
//
// Records are keyed by chunk id; calls take at most MaxLedgerBatch chunks
// (more is ErrInvalidArgument). Chunk ids are random, so backends may
// spread the records by their leading bytes.
type Ledger interface {
	// Condemn records the chunks as condemned since since, replacing the
	// records of those condemned already.
	Condemn(ctx context.Context, since time.Time, chunks [][16]byte) error
	// Condemnations returns the records of those of chunks that are
	// condemned, in chunk id order.
	Condemnations(ctx context.Context, chunks [][16]byte) ([]Condemned, error)
	// ListCondemned returns up to limit records (at most MaxLedgerBatch)
	// in chunk id order, from the first one after *after, or from the
	// first of all when after is nil.
	ListCondemned(ctx context.Context, after *[16]byte, limit int) ([]Condemned, error)
	// Pardon removes the records of the chunks; chunks not condemned are
	// no error.
	Pardon(ctx context.Context, chunks [][16]byte) error
}

// ValidLedgerBatch checks the number of chunks given to one Ledger call.
func ValidLedgerBatch(n int) error {
	if n < 0 || n > MaxLedgerBatch {
		return fmt.Errorf("%d chunks in one ledger call, at most %d: %w", n, MaxLedgerBatch, ErrInvalidArgument)
	}
	return nil
}

// MarshalCondemned encodes the time a chunk was condemned since, the
// value of its record (the chunk id is the key). The zero time is
// ErrInvalidArgument: it would make the chunk due at once.
func MarshalCondemned(since time.Time) ([]byte, error) {
	n, err := unixNanos(since)
	if err == nil && n == nil {
		err = fmt.Errorf("no time condemned since: %w", ErrInvalidArgument)
	}
	if err == nil {
		var data []byte
		if data, err = encode(&metapb.Condemned{SinceUnixNanos: n}); err == nil {
			return data, nil
		}
	}
	return nil, fmt.Errorf("marshal condemned chunk: %w", err)
}

// UnmarshalCondemned decodes the record of chunk.
func UnmarshalCondemned(chunk [16]byte, data []byte) (Condemned, error) {
	var pb metapb.Condemned
	if err := proto.Unmarshal(data, &pb); err != nil {
		return Condemned{}, corrupt("condemned chunk", err)
	}
	if pb.SinceUnixNanos == nil {
		return Condemned{}, corrupt("condemned chunk", errors.New("no time condemned since"))
	}
	return Condemned{Chunk: chunk, Since: fromUnixNanos(pb.SinceUnixNanos)}, nil
}
