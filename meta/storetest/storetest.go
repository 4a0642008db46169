// Package storetest is the contract suite every meta.Store backend runs:
// the same cases with the same answers for mem, bolt, TiKV and Cassandra.
// It drives a store through the semantics table of DESIGN.md (package
// meta's mutations and listing engine) and checks every view of the
// result against a small in-memory reference model, so it is also the
// parity oracle between backends.
//
// A backend's test calls Run:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) meta.Store {
//			s := mem.New()
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
package storetest

import (
	"testing"

	"github.com/stratafs/stratafs/meta"
)

// An Opener returns a fresh, empty store; the caller registers its
// cleanup with t.
type Opener = func(t *testing.T) meta.Store

// Run runs every case of the contract as a subtest of t, one after the
// other. Each case, and each row of a table-driven case, runs on a fresh
// store from open; only the read-mostly subcases of a shared fixture
// share one.
func Run(t *testing.T, open Opener) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, open) })
	}
}

var cases = []struct {
	name string
	run  func(*testing.T, Opener)
}{
	{"Buckets/Create", testBucketsCreate},
	{"Buckets/CreateRace", testBucketsCreateRace},
	{"Buckets/DeleteNotEmpty", testBucketsDeleteNotEmpty},
	{"Buckets/Delete", testBucketsDelete},
	{"Buckets/Update", testBucketsUpdate},
	{"Buckets/Recreate", testBucketsRecreate},
	{"Buckets/Isolation", testBucketsIsolation},
	{"Buckets/DeleteUploads", testBucketsDeleteUploads},
	{"Buckets/Lifecycle", testBucketsLifecycle},
	{"Semantics", testSemantics},
	{"RoundTrip", testRoundTrip},
	{"Check", testCheck},
	{"Share", testShare},
	{"Errors", testErrors},
	{"InvalidKeys", testInvalidKeys},
	{"Paging", shared(pagingFixture,
		subcase{"EveryPageSize", testPaging},
		subcase{"VersionMarkers", testVersionMarkers},
		subcase{"RemovedMarker", testRemovedMarker}, // changes the fixture: last
	)},
	{"TrickyKeys", shared(trickyFixture,
		subcase{"List", testDelimiters},
		subcase{"Versions", testDelimitersVersions},
		subcase{"LiveScan", testLiveScan},
		subcase{"SkipKey", testSkipKey},
		subcase{"Seek", testSeek},
	)},
	{"DeletedPrefix", testDeletedPrefix},
	{"Large", testLarge},
	{"AsOf", testAsOf},
	{"Concurrency/Puts", testConcurrentPuts},
	{"Concurrency/NullRace", testConcurrentNull},
	{"Concurrency/ReadWrite", testConcurrentReadWrite},
	{"Concurrency/Complete", testConcurrentComplete},
	{"Concurrency/Parts", testConcurrentParts},
	{"Uploads/Create", testUploadsCreate},
	{"Uploads/Update", testUploadsUpdate},
	{"Uploads/Parts", testUploadsParts},
	{"Uploads/Complete", testUploadsComplete},
	{"Uploads/List", testUploadsList},
	{"Uploads/Delete", testUploadsDelete},
	{"AccessKeys", testAccessKeys},
	{"Leases/Acquire", testLeasesAcquire},
	{"Leases/Release", testLeasesRelease},
	{"Leases/Race", testLeasesRace},
	{"Checkpoints", testCheckpoints},
	{"Orphans/None", testOrphansNone},
	{"Ledger", testLedger},
	{"Ledger/Many", testLedgerMany},
}

// A subcase runs on a fixture shared with the other subcases of its case.
type subcase struct {
	name string
	run  func(*env)
}

// shared runs subcases in order over one fixture: writing rows is what
// costs time on a durable store, and these cases only read them.
func shared(fixture func(*testing.T, Opener) *env, subs ...subcase) func(*testing.T, Opener) {
	return func(t *testing.T, open Opener) {
		e := fixture(t, open)
		for _, s := range subs {
			t.Run(s.name, func(t *testing.T) { s.run(e.with(t)) })
		}
	}
}
