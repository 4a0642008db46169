package data

import (
	"crypto/md5"
	"hash"
	"sync"
	"sync/atomic"

	md5simd "github.com/minio/md5-simd"
)

// A body that starts while at least simdAfter others are being hashed is
// hashed by md5-simd, which hashes up to 16 streams at once in one
// goroutine with AVX-512 (8 with AVX2). It pays only when many of its
// lanes are full: on this VM's EPYC, 64 MiB streams hashed from memory in
// 256 KiB pieces cost (s CPU/GiB, crypto/md5 vs md5-simd) 1.45 vs 2.19
// for one stream, 1.40 vs 1.67 for three, 1.51 vs 1.13 for four, 1.40 vs
// 0.58 for sixteen. Bodies arriving over HTTP fill fewer lanes: the S3
// server's CPU for 64 MiB PUTs, all on one or all on the other (bench,
// s/GiB, 3 runs each), was 3.79 vs 3.90 with 5 clients, 3.70 vs 3.24
// with 6, 3.68 vs 3.19 with 8.
// Without AVX2 (and off amd64) md5-simd hands out crypto/md5 itself.
const simdAfter = 5

// serverHashers is how many hashers one md5simd.Server hands out before a
// new one takes over. md5-simd v1.1.2 never forgets a closed hasher (its
// server deletes client 0 instead of the hasher's; fixed upstream after
// v1.1.2, in no release) and scans all of them for every batch of blocks
// it hashes: 16 goroutines hashing 64 KiB bodies with one server took 3.4
// s for its first 16,000 hashers and 50 s for the sixth 16,000; with a
// server per 128 hashers, 0.7 s for each. A retired server is closed,
// dropping them, once its last hasher is; a new one costs a goroutine and
// 1.5 MiB of buffers, nothing beside 128 bodies.
const serverHashers = 128

// hashing counts the bodies Write is hashing, process-wide.
var hashing atomic.Int64

// simd holds the md5-simd server new hashers come from, created on the
// first body that needs it.
var simd struct {
	sync.Mutex
	cur    *server
	served int // hashers handed out, by all servers
}

// A server is an md5simd.Server with a count of references to it: its
// open hashers, and one more while it is simd.cur.
type server struct {
	md5simd.Server
	refs int
}

// unref drops a reference to s and closes it with the last one. simd must
// be locked.
func (s *server) unref() {
	if s.refs--; s.refs == 0 {
		s.Close()
	}
}

// newMD5 returns the hash for a body Write starts hashing now, and the
// func that gives it back, to be called once, when it is no longer used.
// The choice of implementation holds for the whole body: MD5 state cannot
// move from one to the other.
func newMD5() (hash.Hash, func()) {
	if hashing.Add(1) <= simdAfter {
		return md5.New(), func() { hashing.Add(-1) }
	}
	simd.Lock()
	if simd.served%serverHashers == 0 {
		if simd.cur != nil {
			simd.cur.unref()
		}
		simd.cur = &server{Server: md5simd.NewServer(), refs: 1}
	}
	simd.served++
	s := simd.cur
	s.refs++
	simd.Unlock()
	h := s.NewHash()
	return h, func() {
		h.Close()
		simd.Lock()
		s.unref()
		simd.Unlock()
		hashing.Add(-1)
	}
}
