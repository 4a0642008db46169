package kv_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// TestUploadEntries checks what the contract cannot see: completing or
// aborting an upload leaves no part entries behind, and deleting a bucket
// leaves no entries of its completed uploads.
func TestUploadEntries(t *testing.T) {
	each(t, meta.Enabled, func(t *testing.T, s meta.Store, b meta.Bucket) {
		ctx := context.Background()
		c := &clock{t: time.Now()}
		expect := func(step string, want map[string]int) {
			t.Helper()
			got, err := kv.Entries(s, b.ID)
			if err != nil || !maps.Equal(got, want) {
				t.Fatalf("%s: entries %v, %v; want %v", step, got, err, want)
			}
		}
		upload := func() *meta.Upload {
			t.Helper()
			u := &meta.Upload{Key: "k", ID: meta.NewUploadID(c.t), Initiated: c.t}
			c.t = c.t.Add(time.Millisecond)
			if err := s.CreateUpload(ctx, b, u); err != nil {
				t.Fatal(err)
			}
			for n := range int32(3) {
				if err := s.PutPart(ctx, b, u.Key, u.ID, &meta.Part{Number: n + 1, Size: 5}); err != nil {
					t.Fatal(err)
				}
			}
			return u
		}
		done, aborted := upload(), upload()
		expect("two uploads of three parts", map[string]int{"U": 2, "P": 6})

		if err := s.DeleteUpload(ctx, b, aborted.Key, aborted.ID); err != nil {
			t.Fatal(err)
		}
		expect("abort", map[string]int{"U": 1, "P": 3})

		v := c.row("k")
		if _, err := s.UpdateUpload(ctx, b, done.Key, done.ID, func(u *meta.Upload) error {
			u.State, u.Version = meta.Completing, v.ID
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		commit(t, s, b, meta.Mutation{Key: "k", Put: v, CompleteUpload: done.ID})
		expect("complete", map[string]int{"U": 1, "V": 1, "C": 1})

		commit(t, s, b, meta.Mutation{Key: "k", Delete: v.ID})
		if err := s.DeleteBucket(ctx, b.Name); err != nil {
			t.Fatalf("DeleteBucket with only a completed upload left: %v", err)
		}
		expect("bucket deleted", map[string]int{})
	})
}
