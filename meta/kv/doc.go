// Package kv implements meta.Store over an ordered, transactional
// key-value engine (Engine). The ordered-KV backends (mem, bolt, TiKV)
// share this code and its key encoding (keys.go): only the engine differs.
//
// # Rows and indexes
//
// Every version row is one V entry, ordered by (key, version id), so a
// key's newest row comes first and a PUT never touches the previous head.
// Two indexes are kept in the same transaction as the rows: N maps a key
// to its null row (GET ?versionId=null, null-row replacement) and C holds
// the attributes of each key's first row (meta.VersionAttrs: the row
// without its manifest) while that row is not a delete marker. A
// manifest longer than manifestApart (a small file's bytes, a big file's
// chunk list) is kept in an M entry beside its row, written with it: the
// V rows of a key then share a page, so a delete marker or a rename does
// not rewrite the old row's bytes (manifest.go says what that saved).
// Rows written whole before 2026-12-04 read as they are. A row
// that shares another's manifest (meta.Version.ManifestOf: a rename or a
// chmod in the mount) reads that row's M entry through an S entry of its
// own, and an H entry counts the rows reading an M entry when more than
// one does: the entry goes with the last of them (manifest.go). A
// manifest short enough to stay in its row is copied instead.
//
// # Decision: the live index (C)
//
// C costs one more write per PUT and per DELETE (set, or removed, beside
// the V row) and stores each live head's attributes twice. In exchange a
// live scan — ListObjects, FUSE readdir — reads C alone: deleted keys and
// old versions are never read, so listing cost does not grow with
// tombstones. A live scan that wants whole rows (a directory rename)
// reads each one's V row too. Until 2026-12-03 C held whole rows, so a
// small object's inline bytes, most of its row, were stored twice: 20,000
// files of 4 KiB created and renamed through the mount left a bolt file
// of 396 MB then and of 270 MB since (each such row takes two 4 KiB
// pages). The CPU per rename did not change beyond the noise. C entries
// written before then are whole rows, which every reader takes as well.
// Without it, a listing walks past every deleted key (meta.LiveIter seeks
// past a key's old rows, but still reads each deleted key's head).
//
// BenchmarkListTombstones lists N = 1000 live keys from a clean bucket and
// from one where they are interleaved with 100·N deleted keys of 10
// versions each (9 objects under a delete marker: 1,000,000 rows), via the
// index and via meta.LiveIter over the history scan. Medians of three runs
// on a shared 2-core AMD EPYC (load from other builds, ±30 % run to run):
//
//	                        clean         among tombstones   tombstones/clean
//	bolt, live index        540k entries/s   530k entries/s     1.07
//	bolt, LiveIter over V   470k entries/s   4.6k entries/s     103
//	mem,  live index        580k entries/s   400k entries/s     1.31 (1.2-1.7)
//	mem,  LiveIter over V   470k entries/s   2.5k entries/s     188
//
// With the index, bolt meets DESIGN.md's targets (tombstones/clean ≤ 1.5,
// ≥ 200k entries/s) with room to spare; without it the same listing is
// about 100 times slower and gets worse with every delete. The mem engine
// drifts above 1.5 in some runs: its skip-list nodes lie scattered over a
// heap of a million other nodes (cache misses, GC scanning); it serves
// tests and ephemeral runs only. The extra write did not show in
// BenchmarkCommit beyond the run-to-run noise (on bolt an fsync dominates
// a commit; on mem it is a few percent). The collector bounds tombstones
// too, but only after their retention period; the index keeps listings
// independent of them meanwhile. So the index stays.
//
// # Multipart uploads
//
// An upload is one U record and each of its parts one P entry beside it.
// PutPart reads the upload's state in the transaction that writes the
// part, and Commit moves a Completing upload to Completed and drops its
// parts in the transaction that writes the version row: no part lands
// after Complete chose the parts, and no row exists whose upload is not
// Completed.
//
// # Iteration
//
// Iterators read in batches (up to 128 entries per read transaction,
// starting at 1 and doubling, because meta.Latest wants one row) and hold
// no transaction between calls. Entries are copied raw and decoded only
// when Next returns them; a Seek whose target lies within the range the
// batch covers moves inside the batch instead of rereading. That is what
// lets meta.LiveIter skip old versions at the cost of a copy each: on
// bolt, dropping the batch at every Seek made the LiveIter rows above
// about 4 times slower, and decoding every entry read about 17 times.
package kv
