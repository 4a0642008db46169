package cassandra

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// TestTwoStores races writers of one key through two stores, as two
// gateways would: their Paxos proposals contend (one store queues its own
// writers), and the key must come out as if the writes ran one by one.
func TestTwoStores(t *testing.T) {
	hosts := cassandraHosts(t)
	ns := namespace(t)
	var stores [2]meta.Store
	for i := range stores {
		s, err := Open(t.Context(), hosts, keyspace, Options{Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		stores[i] = s
	}
	ctx := t.Context()
	b, err := meta.NewBucket("race", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.Versioning = meta.Enabled
	if err := stores[0].CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	versioned := &meta.Version{Key: "k", ID: meta.NewVersionID(time.Now())}
	if err := stores[1].Commit(ctx, b, meta.PutMutation(b, versioned)); err != nil {
		t.Fatal(err)
	}
	suspended, err := stores[0].UpdateBucket(ctx, b.Name, func(b *meta.Bucket) error {
		b.Versioning = meta.Suspended
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Each writer replaces the null row of k, or puts a new version of j.
	const n = 40
	puts := make([]*meta.Version, n)
	var wg sync.WaitGroup
	for i := range n {
		s := stores[i%2]
		wg.Go(func() {
			var m meta.Mutation
			switch i % 4 {
			case 0, 1:
				m = meta.PutMutation(b, &meta.Version{Key: "j", ID: meta.NewVersionID(time.Now())})
			case 2:
				m = meta.PutMutation(suspended, &meta.Version{Key: "k", ID: meta.NewVersionID(time.Now())})
			case 3:
				m, _ = meta.DeleteMutation(suspended, "k", "", time.Now())
			}
			puts[i] = m.Put
			if err := s.Commit(ctx, b, m); err != nil {
				t.Errorf("Commit(%s) through store %d: %v", m.Put.Key, i%2, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}

	rows, err := drainRows(stores[0].Scan(ctx, b, meta.ScanOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	var js, ks []*meta.Version
	for _, v := range rows {
		if v.Key == "j" {
			js = append(js, v)
		} else {
			ks = append(ks, v)
		}
	}
	if len(js) != n/2 {
		t.Errorf("j has %d rows after %d concurrent PUTs", len(js), n/2)
	}
	// k: the one null row that won, then the versioned row.
	null, err := stores[1].GetNull(ctx, b, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(ks) != 2 || ks[0].ID != null.ID || !ks[0].Null || ks[1].ID != versioned.ID {
		t.Fatalf("rows of k after concurrent null writes: %s; want the null row %s, then %s", describe(ks), null.ID, versioned.ID)
	}
}

func describe(vs []*meta.Version) string {
	s := ""
	for _, v := range vs {
		s += fmt.Sprintf(" %s@%s(null %v, marker %v)", v.Key, v.ID, v.Null, v.DeleteMarker)
	}
	return s
}
