package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// acquire takes a lease that must be granted.
func (e *env) acquire(name, holder string, now time.Time, ttl time.Duration) {
	e.t.Helper()
	l, err := e.s.AcquireLease(e.ctx, name, holder, now, ttl)
	want := meta.Lease{Name: name, Holder: holder, Expires: now.Add(ttl)}
	if err != nil || l.Name != want.Name || l.Holder != want.Holder || !l.Expires.Equal(want.Expires) {
		e.t.Fatalf("AcquireLease(%q, %q) = %+v, %v; want %+v", name, holder, l, err, want)
	}
}

// refused tries to take a lease another holder has and checks the answer
// names that holder.
func (e *env) refused(name, holder string, now time.Time, by string, until time.Time) {
	e.t.Helper()
	l, err := e.s.AcquireLease(e.ctx, name, holder, now, time.Minute)
	if !errors.Is(err, meta.ErrLeaseHeld) || l.Holder != by || !l.Expires.Equal(until) {
		e.t.Fatalf("AcquireLease(%q, %q) of a lease %s holds until %v = %+v, %v; want it and ErrLeaseHeld", name, holder, by, until, l, err)
	}
}

func testLeasesAcquire(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	now := e.now
	e.acquire("gc", "a", now, time.Minute)
	e.refused("gc", "b", now.Add(59*time.Second), "a", now.Add(time.Minute))

	// The holder renews; others wait for the new expiry.
	e.acquire("gc", "a", now.Add(30*time.Second), time.Minute)
	e.refused("gc", "b", now.Add(89*time.Second), "a", now.Add(90*time.Second))

	// An expired lease goes to whoever asks first.
	e.acquire("gc", "b", now.Add(90*time.Second), time.Hour)
	e.refused("gc", "a", now.Add(91*time.Second), "b", now.Add(90*time.Second+time.Hour))

	// Names are independent, and leases belong to no bucket.
	e.acquire("other", "a", now, time.Minute)
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatal(err)
	}
	e.refused("other", "c", now, "a", now.Add(time.Minute))

	for _, c := range []struct {
		name, holder string
		ttl          time.Duration
	}{{"", "a", time.Minute}, {"gc", "", time.Minute}, {"gc", "a", 0}, {"gc", "a", -time.Second}} {
		if _, err := e.s.AcquireLease(e.ctx, c.name, c.holder, now, c.ttl); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Fatalf("AcquireLease(%q, %q, ttl %v): %v, want ErrInvalidArgument", c.name, c.holder, c.ttl, err)
		}
	}
}

func testLeasesRelease(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	now := e.now
	if err := e.s.ReleaseLease(e.ctx, "gc", "a"); err != nil {
		t.Fatalf("ReleaseLease of an absent lease: %v", err)
	}
	e.acquire("gc", "a", now, time.Minute)
	if err := e.s.ReleaseLease(e.ctx, "gc", "b"); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("ReleaseLease by another holder: %v, want ErrLeaseHeld", err)
	}
	e.refused("gc", "b", now, "a", now.Add(time.Minute))
	if err := e.s.ReleaseLease(e.ctx, "gc", "a"); err != nil {
		t.Fatalf("ReleaseLease by its holder: %v", err)
	}
	e.acquire("gc", "b", now, time.Minute)

	// A holder whose lease expired and was taken over learns it lost it.
	e.acquire("gc", "c", now.Add(time.Minute), time.Minute)
	if err := e.s.ReleaseLease(e.ctx, "gc", "b"); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("ReleaseLease of a lease taken over: %v, want ErrLeaseHeld", err)
	}
	if err := e.s.ReleaseLease(e.ctx, "", "b"); !errors.Is(err, meta.ErrInvalidArgument) {
		t.Fatalf("ReleaseLease without a name: %v, want ErrInvalidArgument", err)
	}
}

func testLeasesRace(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	const n = 20
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
		held    []meta.Lease
	)
	for i := range n {
		holder := fmt.Sprint("holder-", i)
		wg.Go(func() {
			l, err := e.s.AcquireLease(e.ctx, "gc", holder, e.now, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, holder)
			case errors.Is(err, meta.ErrLeaseHeld):
				held = append(held, l)
			default:
				t.Errorf("AcquireLease: %v", err)
			}
		})
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d of %d concurrent AcquireLease calls won: %q", len(winners), n, winners)
	}
	for _, l := range held {
		if l.Holder != winners[0] {
			t.Fatalf("a refused AcquireLease names %q, the winner is %q", l.Holder, winners[0])
		}
	}
}
