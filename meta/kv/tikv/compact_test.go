package tikv

import (
	"testing"
	"time"

	tikverr "github.com/tikv/client-go/v2/error"
	"github.com/tikv/client-go/v2/oracle"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// TestCompact: the collector's Compact moves the cluster's GC safe point
// to the instant it names, and never back.
func TestCompact(t *testing.T) {
	e := mockEngine(t, "p")
	ctx := t.Context()
	set(t, e, "k", "v1")
	set(t, e, "k", "v2")
	var c meta.Compactor = kv.New(e)
	safePoint := func() time.Time {
		sp, err := e.s.GetPDClient().UpdateGCSafePoint(ctx, 0) // moves nothing: it only reads
		if err != nil {
			t.Fatal(err)
		}
		return oracle.GetTimeFromTS(sp)
	}
	if sp := safePoint(); sp.After(time.Unix(0, 0)) {
		t.Fatalf("a fresh cluster's safe point is %v", sp)
	}
	before := time.Now().Add(-time.Second).Truncate(time.Millisecond)
	if err := c.Compact(ctx, before); err != nil {
		t.Fatal(err)
	}
	if sp := safePoint(); !sp.Equal(before) {
		t.Fatalf("safe point %v after Compact(%v)", sp, before)
	}
	if err := c.Compact(ctx, before.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if sp := safePoint(); !sp.Equal(before) {
		t.Fatalf("safe point moved back to %v", sp)
	}
	var v []byte
	if err := e.View(ctx, func(tx kv.Txn) (err error) { v, err = tx.Get([]byte("k")); return err }); err != nil || string(v) != "v2" {
		t.Fatalf("after Compact k = %q, %v", v, err)
	}
}

// TestCompactDropsHistory: on the mock cluster Compact also drops what the
// safe point lets go, as a TiKV store's own GC does, so that scans stop
// stepping over delete records: a read at an instant between a write and
// the delete that followed it no longer finds the value.
func TestCompactDropsHistory(t *testing.T) {
	e := mockEngine(t, "p")
	ctx := t.Context()
	set(t, e, "k", "v")
	mid, err := e.s.CurrentTimestamp(oracle.GlobalTxnScope)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Update(ctx, func(tx kv.Txn) error { return tx.Delete([]byte("k")) }); err != nil {
		t.Fatal(err)
	}
	readMid := func() ([]byte, error) {
		return e.s.GetSnapshot(mid).Get(ctx, []byte("p\x00k"))
	}
	if v, err := readMid(); err != nil || string(v) != "v" {
		t.Fatalf("before Compact, a read at the instant before the delete = %q, %v; want v", v, err)
	}
	time.Sleep(5 * time.Millisecond) // a safe point of a later millisecond than the delete's commit
	if err := kv.New(e).Compact(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if v, err := readMid(); !tikverr.IsErrNotFound(err) {
		t.Fatalf("after Compact past the delete, a read before it = %q, %v; want not found", v, err)
	}
}
