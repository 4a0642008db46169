package mem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
	"github.com/stratafs/stratafs/meta/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) meta.Store {
		s := New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// dump returns the engine's contents in order, as "key=value" strings.
func dump(t *testing.T, e *engine) []string {
	t.Helper()
	var out []string
	err := e.View(context.Background(), func(tx kv.Txn) error {
		return tx.Scan(nil, []byte{0xff}, func(k, v []byte) bool {
			out = append(out, fmt.Sprintf("%s=%s", k, v))
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUpdateAtomic(t *testing.T) {
	ctx := context.Background()
	e := &engine{l: newList()}
	if err := e.Update(ctx, func(tx kv.Txn) error {
		tx.Set([]byte("a"), []byte("1"))
		return tx.Set([]byte("b"), []byte("1"))
	}); err != nil {
		t.Fatal(err)
	}
	want := dump(t, e)

	errFail := errors.New("fail")
	write := func(tx kv.Txn) {
		tx.Set([]byte("a"), []byte("2")) // overwrite
		tx.Delete([]byte("b"))           // delete
		tx.Set([]byte("c"), []byte("2")) // insert
		tx.Set([]byte("c"), []byte("3")) // overwrite own write
		if v, _ := tx.Get([]byte("c")); string(v) != "3" {
			t.Errorf("read own write: %q", v)
		}
	}
	if err := e.Update(ctx, func(tx kv.Txn) error { write(tx); return errFail }); !errors.Is(err, errFail) {
		t.Fatalf("Update = %v, want fn's error", err)
	}
	if got := dump(t, e); !slices.Equal(got, want) {
		t.Fatalf("after a failed update: %q, want %q", got, want)
	}
	func() {
		defer func() { recover() }()
		e.Update(ctx, func(tx kv.Txn) error { write(tx); panic("boom") })
	}()
	if got := dump(t, e); !slices.Equal(got, want) {
		t.Fatalf("after a panicking update: %q, want %q", got, want)
	}
	if err := e.View(ctx, func(tx kv.Txn) error { return tx.Set([]byte("x"), nil) }); err == nil {
		t.Fatal("write in View succeeded")
	}
}

// TestListModel checks the skip list against a sorted slice under random
// sets, deletes and range scans.
func TestListModel(t *testing.T) {
	l := newList()
	var model []string // sorted keys; values equal keys
	r := rand.New(rand.NewPCG(1, 2))
	key := func() string { return fmt.Sprintf("%03d", r.IntN(500)) }
	for range 20000 {
		k := key()
		i, found := slices.BinarySearch(model, k)
		switch r.IntN(3) {
		case 0, 1:
			if _, existed := l.set([]byte(k), []byte(k)); existed != found {
				t.Fatalf("set %s: existed %v, want %v", k, existed, found)
			}
			if !found {
				model = slices.Insert(model, i, k)
			}
		case 2:
			if _, existed := l.del([]byte(k)); existed != found {
				t.Fatalf("del %s: existed %v, want %v", k, existed, found)
			}
			if found {
				model = slices.Delete(model, i, i+1)
			}
		}
		lo, hi := key(), key()
		var got []string
		for n := l.seek([]byte(lo)); n != nil && bytes.Compare(n.key, []byte(hi)) < 0; n = n.next[0] {
			got = append(got, string(n.key))
		}
		a, _ := slices.BinarySearch(model, lo)
		b, _ := slices.BinarySearch(model, hi)
		if want := model[a:max(a, b)]; !slices.Equal(got, want) {
			t.Fatalf("scan [%s, %s) = %v, want %v", lo, hi, got, want)
		}
	}
}
