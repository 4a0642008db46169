package tikv

import (
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// pausedCommit commits ms in the background; the first mutation's Check
// signals in and waits for proceed on its first run.
func pausedCommit(t *testing.T, s meta.Store, b meta.Bucket, ms []meta.Mutation) (in, proceed chan struct{}, done chan error) {
	in, proceed, done = make(chan struct{}), make(chan struct{}), make(chan error, 1)
	first := true
	ms[0].Check = func(*meta.Version) error {
		if first {
			first = false
			close(in)
			<-proceed
		}
		return nil
	}
	go func() { done <- s.Commit(t.Context(), b, ms...) }()
	return
}

// TestSkewMarker races a delete marker against a PUT on a key whose head is
// already a marker. Under snapshot isolation the two only conflict because
// every mutation of a key writes its live-index entry (kv's apply); without
// that, the newest row was a marker while List still showed the key.
func TestSkewMarker(t *testing.T) {
	e := mockEngine(t, "")
	s := kv.New(e)
	ctx := t.Context()
	b, _ := meta.NewBucket("skew", "", time.Now())
	b.Versioning = meta.Enabled
	if err := s.CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}
	d0, _ := meta.DeleteMutation(b, "k", "", time.Now())
	if err := s.Commit(ctx, b, d0); err != nil {
		t.Fatal(err)
	}
	x := &meta.Version{Key: "k", ID: meta.NewVersionID(time.Now()), Size: 1}
	in, proceed, done := pausedCommit(t, s, b, []meta.Mutation{meta.PutMutation(b, x)})
	<-in
	m, _ := meta.DeleteMutation(b, "k", "", time.Now())
	if err := s.Commit(ctx, b, m); err != nil {
		t.Fatal(err)
	}
	close(proceed)
	if err := <-done; err != nil {
		t.Logf("paused PUT: %v", err)
	}
	latest, err := meta.Latest(ctx, s, b, "k")
	res, lerr := meta.List(ctx, s, b, meta.ListOptions{})
	t.Logf("latest %v marker=%v err=%v; List: %d objects, %v", latest.ID, latest.DeleteMarker, err, len(res.Objects), lerr)
	if latest.DeleteMarker && len(res.Objects) != 0 {
		t.Errorf("write skew: the latest row is a delete marker but List shows the key")
	}
}
