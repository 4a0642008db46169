package kv

import (
	"context"

	"github.com/stratafs/stratafs/meta"
)

// ForgetBucket removes the record of bucket name and nothing else, as if
// DeleteBucket had raced a write that left rows behind.
func ForgetBucket(s meta.Store, name string) error {
	return s.(*Store).e.Update(context.Background(), func(tx Txn) error { return tx.Delete(bucketKey(name)) })
}
