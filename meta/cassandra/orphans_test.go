package cassandra

import (
	"fmt"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/storetest"
)

func TestOrphans(t *testing.T) {
	storetest.Orphans(t, func(t *testing.T) meta.Store { return openStore(t, Options{}) },
		func(t *testing.T, s meta.Store, b meta.Bucket) {
			st := s.(*Store)
			del := fmt.Sprintf("DELETE FROM %s.buckets WHERE ns = ? AND name = ? IF EXISTS", keyspace)
			if err := st.session.Query(del, st.ns, b.Name).ExecContext(t.Context()); err != nil {
				t.Fatal(err)
			}
		})
}
