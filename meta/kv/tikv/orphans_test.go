package tikv

import (
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/storetest"
)

// TestOrphans: what a write racing DeleteBucket leaves under snapshot
// isolation is found and removed. The race is not reproducible on
// demand, so the bucket record is deleted under the store, by its key:
// 'B', the name, 0 0 (package kv's encoding).
func TestOrphans(t *testing.T) {
	var e *engine
	storetest.Orphans(t, func(t *testing.T) meta.Store {
		e = mockEngine(t, "orphans")
		return kv.New(e)
	}, func(t *testing.T, _ meta.Store, b meta.Bucket) {
		err := e.Update(t.Context(), func(tx kv.Txn) error {
			return tx.Delete(append([]byte("B"+b.Name), 0, 0))
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
