package cassandra

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

// queries holds the store's CQL, with the keyspace filled in.
type queries struct {
	keyspace string // for the statements built per table (orphans.go)

	bucket, buckets, createBucket, updateBucket, deleteBucket string
	accessKey, accessKeys, createAccessKey, deleteAccessKey   string
	lease, createLease, updateLease, deleteLease              string

	// objects: the head row (kind 0) and version rows (kind 1) of a key.
	keyState, rows, nullID, scan, scanTo, anyRow             string
	insertHead, updateHead, deleteHead, insertRow, deleteRow string
	upload, createUpload, updateUpload, guardUpload          string
	deleteUpload, part, parts, partsTo, putPart, delParts    string
	scanUploads, scanUploadsTo, uploadStates, dropUploads    string
}

func newQueries(ks string) queries {
	r := strings.NewReplacer("$ks", ks, "$obj", "bucket_id = ? AND shard = ?",
		"$head", "bucket_id = ? AND shard = ? AND kind = 0 AND key = ? AND version_id = 0x",
		"$up", "bucket_id = ? AND shard = ? AND kind = 0 AND key = ? AND upload_id = ? AND part = 0")
	q := func(s string) string { return r.Replace(s) }
	return queries{
		keyspace: ks,

		bucket:       q(`SELECT data FROM $ks.buckets WHERE ns = ? AND name = ?`),
		buckets:      q(`SELECT data FROM $ks.buckets WHERE ns = ?`),
		createBucket: q(`INSERT INTO $ks.buckets (ns, name, data) VALUES (?, ?, ?) IF NOT EXISTS`),
		updateBucket: q(`UPDATE $ks.buckets SET data = ? WHERE ns = ? AND name = ? IF data = ?`),
		deleteBucket: q(`DELETE FROM $ks.buckets WHERE ns = ? AND name = ? IF data = ?`),

		accessKey:       q(`SELECT data FROM $ks.access_keys WHERE ns = ? AND id = ?`),
		accessKeys:      q(`SELECT data FROM $ks.access_keys WHERE ns = ?`),
		createAccessKey: q(`INSERT INTO $ks.access_keys (ns, id, data) VALUES (?, ?, ?) IF NOT EXISTS`),
		deleteAccessKey: q(`DELETE FROM $ks.access_keys WHERE ns = ? AND id = ? IF EXISTS`),

		lease:       q(`SELECT data FROM $ks.leases WHERE ns = ? AND name = ?`),
		createLease: q(`INSERT INTO $ks.leases (ns, name, data) VALUES (?, ?, ?) IF NOT EXISTS`),
		updateLease: q(`UPDATE $ks.leases SET data = ? WHERE ns = ? AND name = ? IF data = ?`),
		deleteLease: q(`DELETE FROM $ks.leases WHERE ns = ? AND name = ? IF data = ?`),

		// The head row and the first three version rows: enough to know
		// the key's first row and whether removing two rows empties it.
		keyState: q(`SELECT kind, version_id, row, seq, null_id FROM $ks.objects
			WHERE $obj AND (kind, key) IN ((0, ?), (1, ?)) LIMIT 4`),
		rows:   q(`SELECT version_id, row FROM $ks.objects WHERE $obj AND kind = 1 AND key = ? AND version_id IN ?`),
		nullID: q(`SELECT null_id FROM $ks.objects WHERE $head`),
		scan: q(`SELECT key, version_id, row FROM $ks.objects
			WHERE $obj AND kind = 1 AND (key, version_id) >= (?, ?) LIMIT ?`),
		scanTo: q(`SELECT key, version_id, row FROM $ks.objects
			WHERE $obj AND kind = 1 AND (key, version_id) >= (?, ?) AND (key) < (?) LIMIT ?`),
		anyRow:     q(`SELECT key FROM $ks.objects WHERE $obj LIMIT 1`),
		insertHead: q(`INSERT INTO $ks.objects (bucket_id, shard, kind, key, version_id, seq, null_id) VALUES (?, ?, 0, ?, 0x, ?, ?) IF NOT EXISTS`),
		updateHead: q(`UPDATE $ks.objects SET seq = ?, null_id = ? WHERE $head IF seq = ?`),
		deleteHead: q(`DELETE FROM $ks.objects WHERE $head IF seq = ?`),
		insertRow:  q(`INSERT INTO $ks.objects (bucket_id, shard, kind, key, version_id, row) VALUES (?, ?, 1, ?, ?, ?)`),
		deleteRow:  q(`DELETE FROM $ks.objects WHERE $obj AND kind = 1 AND key = ? AND version_id = ?`),

		upload: q(`SELECT data FROM $ks.uploads WHERE $up`),
		createUpload: q(fmt.Sprintf(`INSERT INTO $ks.uploads (bucket_id, shard, kind, key, upload_id, part, data, state)
			VALUES (?, ?, 0, ?, ?, 0, ?, %d) IF NOT EXISTS`, meta.Uploading)),
		updateUpload: q(`UPDATE $ks.uploads SET data = ?, state = ? WHERE $up IF data = ?`),
		// A no-op write whose condition keeps a part out of an upload
		// that is no longer Uploading.
		guardUpload:  q(fmt.Sprintf(`UPDATE $ks.uploads SET state = %[1]d WHERE $up IF state = %[1]d`, meta.Uploading)),
		deleteUpload: q(`DELETE FROM $ks.uploads WHERE $up IF EXISTS`),
		part:         q(`SELECT data FROM $ks.uploads WHERE $obj AND kind = 1 AND key = ? AND upload_id = ? AND part = ?`),
		parts:        q(`SELECT data FROM $ks.uploads WHERE $obj AND kind = 1 AND key = ? AND upload_id = ? AND part > ?`),
		partsTo:      q(`SELECT data FROM $ks.uploads WHERE $obj AND kind = 1 AND key = ? AND upload_id = ? AND part > ? LIMIT ?`),
		putPart:      q(`INSERT INTO $ks.uploads (bucket_id, shard, kind, key, upload_id, part, data) VALUES (?, ?, 1, ?, ?, ?, ?)`),
		delParts:     q(`DELETE FROM $ks.uploads WHERE $obj AND kind = 1 AND key = ? AND upload_id = ?`),
		scanUploads: q(`SELECT key, upload_id, data FROM $ks.uploads
			WHERE $obj AND kind = 0 AND (key, upload_id) >= (?, ?) LIMIT ?`),
		scanUploadsTo: q(`SELECT key, upload_id, data FROM $ks.uploads
			WHERE $obj AND kind = 0 AND (key, upload_id) >= (?, ?) AND (key) < (?) LIMIT ?`),
		uploadStates: q(`SELECT key, upload_id, state FROM $ks.uploads WHERE $obj AND kind = 0`),
		dropUploads:  q(`DELETE FROM $ks.uploads WHERE $obj`),
	}
}

// A stmt is one statement of a batch.
type stmt struct {
	cql  string
	args []any
}

// execCAS runs stmts as one conditional batch (they must all write one
// partition) and reports whether its conditions held.
func (s *Store) execCAS(ctx context.Context, stmts ...stmt) (bool, error) {
	b := s.session.Batch(gocql.LoggedBatch)
	for _, st := range stmts {
		b.Query(st.cql, st.args...)
	}
	applied, it, err := b.MapExecCASContext(ctx, map[string]any{})
	if it != nil {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}
	return applied, err
}

// stripes serialize the conditional writes this process sends to one
// partition. Paxos lets one of several concurrent proposals on a
// partition win and makes the others retry, with backoff and in the end
// a timeout: writers in one process queue here instead, and only writers
// in different processes contend in Paxos.
type stripes []chan struct{}

func newStripes() stripes {
	s := make(stripes, 256)
	for i := range s {
		s[i] = make(chan struct{}, 1)
	}
	return s
}

// A partition names a partition for the stripes: a table and, for the
// bucket-scoped ones, the bucket id and shard.
type partition struct {
	table    byte
	bucketID uint64
	shard    int
}

const (
	tableBuckets byte = iota
	tableAccessKeys
	tableLeases
	tableObjects
	tableUploads
)

// lock takes p's stripe, or fails when ctx ends first.
func (s stripes) lock(ctx context.Context, p partition) (unlock func(), err error) {
	h := (p.bucketID ^ uint64(p.table)<<56 ^ uint64(p.shard)) * 0x9e3779b97f4a7c15
	c := s[h>>56]
	select {
	case c <- struct{}{}:
		return func() { <-c }, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// maxAttempts bounds the attempts of one conditional write that keeps
// losing to writers in other processes.
const maxAttempts = 30

// lwt runs attempt, a read-decide-write round on partition p, until it
// reports done. attempt returns done=false when its condition did not
// hold because another writer came between its read and its write; it
// then runs again after a backoff. After a write whose outcome is unknown
// (a coordinator timeout), attempt runs with unsure=true and must first
// check whether its earlier write took effect. Errors are returned as
// they are, after attempts run out as meta.ErrConflict.
func (s *Store) lwt(ctx context.Context, p partition, attempt func(unsure bool) (done bool, err error)) error {
	unlock, err := s.locks.lock(ctx, p)
	if err != nil {
		return err
	}
	defer unlock()
	unsure := false
	for try := 1; ; try++ {
		done, err := attempt(unsure)
		switch {
		case err != nil && (!unknownOutcome(err) || try == maxAttempts):
			if unknownOutcome(err) {
				return fmt.Errorf("outcome unknown, it may have been applied: %w", err)
			}
			return err
		case err != nil:
			unsure = true
		case done:
			return nil
		case try == maxAttempts:
			return fmt.Errorf("%d attempts lost to concurrent writers: %w", try, meta.ErrConflict)
		}
		// Up to 1 ms, doubling to 128 ms, jittered so that rivals part.
		d := time.Duration(rand.Int64N(int64(time.Millisecond) << min(try-1, 7)))
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
}
