package meta

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"sync"
	"time"
)

// A VersionID names one version row of a key. Its 16 bytes are
// [MaxUint64 − unix-nanoseconds, big-endian][8 random bytes], so byte order
// is newest-first: an ascending scan of a key's rows meets the latest
// version first and IsLatest is derived while scanning, never stored
// (ADR-0002). On the wire it is the 32-character lowercase hex of the bytes,
// so string order equals row order too.
type VersionID [16]byte

// NullVersion is the wire name of the null version (unversioned and
// suspended buckets). The null row still has an ordinary sort id; only its
// Null flag makes it "null".
const NullVersion = "null"

// Time reports the instant the id was issued.
func (id VersionID) Time() time.Time {
	inv := binary.BigEndian.Uint64(id[:8])
	return time.Unix(0, int64(math.MaxUint64-inv)).UTC()
}

// String returns the 32-character hex form used on the wire.
func (id VersionID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the zero id, which sorts before every real
// id and so addresses "the first version of a key" in a seek.
func (id VersionID) IsZero() bool { return id == VersionID{} }

// Compare orders ids as rows are stored: newest first.
func (id VersionID) Compare(o VersionID) int {
	for i := range id {
		if id[i] != o[i] {
			if id[i] < o[i] {
				return -1
			}
			return 1
		}
	}
	return 0
}

// ParseVersionID parses the 32-character hex form. It does not accept
// "null": callers that allow the null version check for NullVersion first.
func ParseVersionID(s string) (VersionID, error) {
	var id VersionID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("version id %q: %w", s, ErrInvalidVersionID)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return id, fmt.Errorf("version id %q: %w", s, ErrInvalidVersionID)
		}
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("version id %q: %w", s, ErrInvalidVersionID)
	}
	return id, nil
}

// AsOf returns the smallest id a version issued at or before t can have:
// seeking a key to AsOf(t) lands on its newest row not newer than t. An
// id holds the nanoseconds since 1970 in an int64: an instant before 1970
// is taken as 1970 (no version is that old), one after 2262 as the last
// nanosecond an id can hold (every version is older).
func AsOf(t time.Time) VersionID {
	ns := int64(0)
	switch {
	case t.After(time.Unix(0, math.MaxInt64)):
		ns = math.MaxInt64
	case t.After(time.Unix(0, 0)):
		ns = t.UnixNano()
	}
	var id VersionID
	binary.BigEndian.PutUint64(id[:8], math.MaxUint64-uint64(ns))
	return id
}

// idClock issues ids with strictly increasing timestamps within a process,
// even when the wall clock stalls or steps back.
var idClock struct {
	sync.Mutex
	last int64
}

// NewVersionID issues a fresh id stamped with now (the caller's clock, so
// tests can control time). Ids issued by one process never share a
// timestamp: a stalled or stepped-back clock yields last+1ns, so a fake
// clock handed to the core must not run behind times already used.
func NewVersionID(t time.Time) VersionID {
	idClock.Lock()
	now := t.UnixNano()
	if now <= idClock.last {
		now = idClock.last + 1
	}
	idClock.last = now
	idClock.Unlock()

	var id VersionID
	binary.BigEndian.PutUint64(id[:8], math.MaxUint64-uint64(now))
	if _, err := rand.Read(id[8:]); err != nil {
		panic(fmt.Sprintf("meta: reading random bytes: %v", err))
	}
	return id
}
