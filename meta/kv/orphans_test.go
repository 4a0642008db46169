package kv_test

import (
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/storetest"
)

func TestOrphans(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			storetest.Orphans(t, func(t *testing.T) meta.Store {
				s := e.open(t)
				t.Cleanup(func() { s.Close() })
				return s
			}, func(t *testing.T, s meta.Store, b meta.Bucket) {
				if err := kv.ForgetBucket(s, b.Name); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
