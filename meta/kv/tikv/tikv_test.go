package tikv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pingcap/failpoint"
	"github.com/pingcap/log"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/tikv"
	"go.uber.org/zap"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/storetest"
)

func TestMain(m *testing.M) {
	// client-go logs at INFO and warns on every commit that the mock
	// cannot do in one phase: keep what matters when a test fails.
	log.SetLevel(zap.ErrorLevel)
	// TestUnavailable needs a failpoint; client-go reads the switch
	// unguarded, so it must be set before any client runs.
	tikv.EnableFailpoints()
	os.Exit(m.Run())
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) meta.Store {
		s, err := NewMock("storetest")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// mockCluster starts a mock cluster and returns a client of it, closed
// when the test ends.
func mockCluster(t *testing.T) (*tikv.KVStore, *testutils.MockCluster) {
	t.Helper()
	s, c, err := newMockCluster()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

// mockEngine returns an engine with the given prefix on a fresh mock
// cluster.
func mockEngine(t *testing.T, prefix string) *engine {
	t.Helper()
	s, _ := mockCluster(t)
	return newMockEngine(s, prefix, defaultTimeout)
}

func set(t *testing.T, e *engine, kvs ...string) {
	t.Helper()
	err := e.Update(t.Context(), func(tx kv.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := tx.Set([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// scan returns the keys and values of [start, end) as "k=v" strings, read
// in tx.
func scan(tx kv.Txn, start, end string) ([]string, error) {
	var got []string
	err := tx.Scan([]byte(start), []byte(end), func(k, v []byte) bool {
		got = append(got, string(k)+"="+string(v))
		return true
	})
	return got, err
}

func viewScan(t *testing.T, e *engine, start, end string) []string {
	t.Helper()
	var got []string
	if err := e.View(t.Context(), func(tx kv.Txn) (err error) {
		got, err = scan(tx, start, end)
		return err
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return got
}

func TestTxn(t *testing.T) {
	e := mockEngine(t, "p")
	set(t, e, "a", "1", "b", "2", "b\x00", "3", "c", "4", "d", "5")
	for _, c := range []struct {
		start, end string
		want       []string
	}{
		{"b", "d", []string{"b=2", "b\x00=3", "c=4"}},
		{"b\x00", "c\x00", []string{"b\x00=3", "c=4"}},
		{"", "\xff", []string{"a=1", "b=2", "b\x00=3", "c=4", "d=5"}},
		{"c", "c", nil},
		{"d", "c", nil},
		{"e", "f", nil},
	} {
		if got := viewScan(t, e, c.start, c.end); !slices.Equal(got, c.want) {
			t.Errorf("Scan(%q, %q) = %q, want %q", c.start, c.end, got, c.want)
		}
	}

	err := e.Update(t.Context(), func(tx kv.Txn) error {
		if v, err := tx.Get([]byte("zz")); v != nil || err != nil {
			t.Errorf("Get(absent) = %q, %v; want nil, nil", v, err)
		}
		if err := tx.Delete([]byte("zz")); err != nil {
			t.Errorf("Delete(absent): %v", err)
		}
		if err := tx.Set([]byte("e"), nil); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("Set(empty value) = %v, want ErrInvalidArgument", err)
		}
		// Reads see the transaction's own writes, scans included.
		if err := tx.Delete([]byte("b")); err != nil {
			return err
		}
		if err := tx.Set([]byte("bb"), []byte("6")); err != nil {
			return err
		}
		if v, err := tx.Get([]byte("b")); v != nil || err != nil {
			t.Errorf("Get(deleted) = %q, %v; want nil, nil", v, err)
		}
		got, err := scan(tx, "a", "c")
		if want := []string{"a=1", "b\x00=3", "bb=6"}; !slices.Equal(got, want) || err != nil {
			t.Errorf("Scan in Update = %q, %v; want %q", got, err, want)
		}
		var first []string
		err = tx.Scan([]byte("a"), []byte("z"), func(k, _ []byte) bool {
			first = append(first, string(k))
			return len(first) < 2
		})
		if want := []string{"a", "b\x00"}; !slices.Equal(first, want) || err != nil {
			t.Errorf("Scan stopped after two = %q, %v; want %q", first, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := viewScan(t, e, "", "\xff"), []string{"a=1", "b\x00=3", "bb=6", "c=4", "d=5"}; !slices.Equal(got, want) {
		t.Errorf("after Update: %q, want %q", got, want)
	}

	errFn := errors.New("fn failed")
	err = e.Update(t.Context(), func(tx kv.Txn) error {
		if err := tx.Set([]byte("a"), []byte("lost")); err != nil {
			return err
		}
		return errFn
	})
	if err != errFn {
		t.Errorf("Update = %v, want fn's error as it is", err)
	}
	err = e.View(t.Context(), func(tx kv.Txn) error {
		if v, err := tx.Get([]byte("a")); string(v) != "1" || err != nil {
			t.Errorf("Get after a failed Update = %q, %v; want 1", v, err)
		}
		if err := tx.Set([]byte("a"), []byte("x")); err == nil {
			t.Error("Set in View succeeded")
		}
		if err := tx.Delete([]byte("a")); err == nil {
			t.Error("Delete in View succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestViewSnapshot checks that a View reads one snapshot, whatever commits
// meanwhile.
func TestViewSnapshot(t *testing.T) {
	e := mockEngine(t, "")
	set(t, e, "a", "1", "b", "1")
	err := e.View(t.Context(), func(tx kv.Txn) error {
		set(t, e, "a", "2", "b", "2", "c", "2")
		got, err := scan(tx, "", "\xff")
		if want := []string{"a=1", "b=1"}; !slices.Equal(got, want) || err != nil {
			t.Errorf("Scan in a View begun before a commit = %q, %v; want %q", got, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPrefixes runs three stores on one cluster, with prefixes "", "a" and
// "ab" (whose keys must not fall in a's range): each sees only its own.
func TestPrefixes(t *testing.T) {
	ctx := t.Context()
	s, _ := mockCluster(t)
	prefixes := []string{"", "a", "ab"}
	var stores []*kv.Store
	for i, p := range prefixes {
		st := kv.New(newEngine(s, p, defaultTimeout)) // the cluster's cleanup closes the client
		stores = append(stores, st)
		b, err := meta.NewBucket("photos", "", time.Now())
		if err != nil {
			t.Fatal(err)
		}
		b.Versioning = meta.Enabled
		if err := st.CreateBucket(ctx, b); err != nil {
			t.Fatalf("CreateBucket in namespace %q: %v", p, err)
		}
		for j := range i + 1 {
			v := &meta.Version{Key: fmt.Sprintf("%s-%d", p, j), ID: meta.NewVersionID(time.Now()), Size: 1}
			if err := st.Commit(ctx, b, meta.PutMutation(b, v)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, st := range stores {
		bs, err := st.Buckets(ctx)
		if err != nil || len(bs) != 1 {
			t.Fatalf("namespace %q: buckets %v, %v; want its own one", prefixes[i], bs, err)
		}
		res, err := meta.List(ctx, st, bs[0], meta.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, v := range res.Objects {
			keys = append(keys, v.Key)
		}
		var want []string
		for j := range i + 1 {
			want = append(want, fmt.Sprintf("%s-%d", prefixes[i], j))
		}
		if !slices.Equal(keys, want) {
			t.Errorf("namespace %q lists %q, want %q", prefixes[i], keys, want)
		}
	}
	if _, err := NewMock("a\x00b"); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Errorf("NewMock(prefix with a zero byte) = %v, want ErrInvalidArgument", err)
	}
}

// interfere returns an Update function that writes k and then, on each of
// its first n runs, has another transaction commit a write of k before
// its own commit: a write conflict n times over. It counts its runs.
func interfere(t *testing.T, other *engine, k string, n int) (fn func(kv.Txn) error, runs *atomic.Int64) {
	runs = new(atomic.Int64)
	return func(tx kv.Txn) error {
		if err := tx.Set([]byte(k), []byte("mine")); err != nil {
			return err
		}
		if err := tx.Set([]byte(k+"/also"), []byte("mine")); err != nil {
			return err
		}
		if runs.Add(1) <= int64(n) {
			set(t, other, k, fmt.Sprint("theirs ", runs.Load()))
		}
		return nil
	}, runs
}

// twoEngines returns two engines on one fresh mock cluster, as two
// processes sharing it would have.
func twoEngines(t *testing.T) (*engine, *engine) {
	t.Helper()
	s, _ := mockCluster(t)
	return newEngine(s, "", defaultTimeout), newEngine(s, "", defaultTimeout)
}

func TestConflictRetried(t *testing.T) {
	e, other := twoEngines(t)
	fn, runs := interfere(t, other, "k", 3)
	if err := e.Update(t.Context(), fn); err != nil {
		t.Fatalf("Update after 3 conflicts: %v", err)
	}
	if got := viewScan(t, e, "k", "l"); runs.Load() != 4 || !slices.Equal(got, []string{"k=mine", "k/also=mine"}) {
		t.Fatalf("after %d runs: %q; want 4 runs, the last one's writes", runs.Load(), got)
	}
}

func TestConflictGivesUp(t *testing.T) {
	e, other := twoEngines(t)
	fn, runs := interfere(t, other, "k", attempts)
	err := e.Update(t.Context(), fn)
	if !errors.Is(err, meta.ErrConflict) || runs.Load() != attempts {
		t.Fatalf("Update conflicting %d times = %v after %d runs; want ErrConflict", attempts, err, runs.Load())
	}
	// Nothing of the failed transaction is visible, not even the key no
	// one else wrote.
	want := []string{fmt.Sprint("k=theirs ", attempts)}
	if got := viewScan(t, e, "k", "l"); !slices.Equal(got, want) {
		t.Fatalf("after a failed Update: %q, want %q", got, want)
	}
}

func TestConflictCanceled(t *testing.T) {
	e, other := twoEngines(t)
	fn, runs := interfere(t, other, "k", attempts)
	ctx, cancel := context.WithCancel(t.Context())
	err := e.Update(ctx, func(tx kv.Txn) error {
		if runs.Load() == 2 {
			cancel()
		}
		return fn(tx)
	})
	if !errors.Is(err, context.Canceled) || runs.Load() != 3 {
		t.Fatalf("Update canceled during run 3 = %v after %d runs; want context.Canceled after 3", err, runs.Load())
	}
	if err := e.Update(ctx, fn); !errors.Is(err, context.Canceled) || runs.Load() != 3 {
		t.Fatalf("Update with a canceled context = %v, fn run %d more times; want context.Canceled, none", err, runs.Load()-3)
	}
	if err := e.View(ctx, func(kv.Txn) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("View with a canceled context = %v; want context.Canceled", err)
	}
}

// TestConcurrentIncrements runs read-modify-write transactions on one key
// from many goroutines whose first runs all read before any commits: all
// but one conflict at least once. Each Update either commits or fails with
// ErrConflict, and the counter ends up counting the commits, each of which
// also left its own key: nothing lost, nothing half-applied.
func TestConcurrentIncrements(t *testing.T) {
	e := mockEngine(t, "")
	const n = 32
	var ok, runs atomic.Int64
	var read, wg sync.WaitGroup
	read.Add(n)
	for i := range n {
		first := true
		wg.Go(func() {
			err := e.Update(t.Context(), func(tx kv.Txn) error {
				runs.Add(1)
				v, err := tx.Get([]byte("counter"))
				if first {
					first = false
					read.Done()
					read.Wait()
				}
				if err != nil {
					return err
				}
				c := 0
				if v != nil {
					fmt.Sscan(string(v), &c)
				}
				if err := tx.Set([]byte(fmt.Sprintf("w/%02d", i)), []byte("done")); err != nil {
					return err
				}
				return tx.Set([]byte("counter"), []byte(fmt.Sprint(c+1)))
			})
			switch {
			case err == nil:
				ok.Add(1)
			case !errors.Is(err, meta.ErrConflict):
				t.Errorf("increment %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	counter, writers := viewScan(t, e, "counter", "counter\x00"), viewScan(t, e, "w/", "w0")
	if want := fmt.Sprint("counter=", ok.Load()); len(counter) != 1 || counter[0] != want || len(writers) != int(ok.Load()) {
		t.Fatalf("%d of %d increments committed; counter %q, %d writers' keys", ok.Load(), n, counter, len(writers))
	}
	t.Logf("%d of %d increments committed in %d runs", ok.Load(), n, runs.Load())
	if ok.Load() < n/2 || runs.Load() < 2*n-1 {
		t.Errorf("%d of %d increments committed in %d runs; want most, after %d runs at least", ok.Load(), n, runs.Load(), 2*n-1)
	}
}

// TestUnavailable stops the cluster's only store: calls fail with
// ErrUnavailable within the engine's timeout instead of hanging, and
// succeed again once the store is back.
func TestUnavailable(t *testing.T) {
	s, c := mockCluster(t)
	const timeout = time.Second
	e := newEngine(s, "", timeout)
	set(t, e, "k", "1")
	store := c.GetAllStores()[0].GetId()
	c.StopStore(store)
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"Update": func() error {
			return e.Update(ctx, func(tx kv.Txn) error { return tx.Set([]byte("k"), []byte("2")) })
		},
		"View": func() error {
			return e.View(ctx, func(tx kv.Txn) error {
				_, err := tx.Get([]byte("k"))
				return err
			})
		},
		"View scan": func() error {
			return e.View(ctx, func(tx kv.Txn) error {
				_, err := scan(tx, "", "\xff")
				return err
			})
		},
	} {
		start := time.Now()
		err := call()
		if d := time.Since(start); !errors.Is(err, meta.ErrUnavailable) || d > timeout+2*time.Second {
			t.Errorf("%s with the store stopped = %v after %v; want ErrUnavailable after about %v", name, err, d, timeout)
		}
	}
	c.StartStore(store)
	// The region cache now takes the store for dead until a health check
	// (a gRPC call to its address) answers: the mock's stores have no
	// address to call, so answer for them.
	const liveness = "tikvclient/injectLiveness"
	if err := failpoint.Enable(liveness, `return("reachable")`); err != nil {
		t.Fatal(err)
	}
	defer failpoint.Disable(liveness)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.View(ctx, func(tx kv.Txn) error {
			v, err := tx.Get([]byte("k"))
			if err == nil && string(v) != "1" {
				err = fmt.Errorf("k = %q, want 1: the failed Update took effect", v)
			}
			return err
		})
		if err == nil {
			break
		}
		if !errors.Is(err, meta.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("View after the store restarted: %v", err)
		}
	}
	set(t, e, "k", "3")
}

func TestClose(t *testing.T) {
	s, _, err := newMockCluster()
	if err != nil {
		t.Fatal(err)
	}
	e := newEngine(s, "", defaultTimeout)
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := e.Update(t.Context(), func(kv.Txn) error { return nil }); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("Update after Close = %v, want ErrUnavailable", err)
	}
	if err := e.View(t.Context(), func(kv.Txn) error { return nil }); !errors.Is(err, meta.ErrUnavailable) {
		t.Errorf("View after Close = %v, want ErrUnavailable", err)
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url    string
		addrs  []string
		prefix string
	}{
		{"tikv://pd1:2379", []string{"pd1:2379"}, ""},
		{"tikv://pd1:2379,pd2:2379?prefix=x", []string{"pd1:2379", "pd2:2379"}, "x"},
		{"tikv://10.0.0.1:2379,[::1]:2379/?prefix=team%2Fa", []string{"10.0.0.1:2379", "[::1]:2379"}, "team/a"},
	} {
		addrs, prefix, err := ParseURL(c.url)
		if err != nil || !slices.Equal(addrs, c.addrs) || prefix != c.prefix {
			t.Errorf("ParseURL(%q) = %q, %q, %v; want %q, %q", c.url, addrs, prefix, err, c.addrs, c.prefix)
		}
	}
	for _, u := range []string{
		"", "pd1:2379", "http://pd1:2379", "tikv://", "tikv://pd1", "tikv://pd1:2379,", "tikv://:2379",
		"tikv://pd1:2379/path", "tikv://user@pd1:2379", "tikv://pd1:2379?prefx=x",
		"tikv://pd1:2379?prefix=a&prefix=b", "tikv://pd1:2379?prefix=a%00b", "tikv://pd1:2379#x",
	} {
		if addrs, prefix, err := ParseURL(u); err == nil {
			t.Errorf("ParseURL(%q) = %q, %q; want an error", u, addrs, prefix)
		}
	}
}

// TestOpenUnreachable opens a store on an address where no PD listens:
// Open fails, and by its context's deadline.
func TestOpenUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	s, err := Open(ctx, []string{"127.0.0.1:1"}, "")
	if err == nil {
		s.Close()
		t.Fatal("Open with no PD listening succeeded")
	}
	if d := time.Since(start); d > 2*time.Second || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open with no PD listening = %v after %v; want the deadline's error after 1s", err, d)
	}
}
