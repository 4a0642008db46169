package gc

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

func TestLeaseLost(t *testing.T) {
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	svc := object.New(m, d, object.Options{})
	o := Options{LeaseTTL: 30 * time.Millisecond, Holder: "me", Logger: slog.New(slog.DiscardHandler)}.withDefaults()
	ctx, release, err := holdLease(t.Context(), svc, o)
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	// Renewals keep it: nobody else gets it meanwhile.
	time.Sleep(100 * time.Millisecond)
	if _, err := m.AcquireLease(t.Context(), LeaseName, "other", time.Now(), time.Hour); !errors.Is(err, meta.ErrLeaseHeld) {
		t.Fatalf("lease taken from a live holder: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("a renewed lease was lost: %v", context.Cause(ctx))
	}

	// Taken over (its holder stalled past the expiry, say): the run ends.
	if _, err := m.AcquireLease(t.Context(), LeaseName, "other", time.Now().Add(time.Hour), time.Hour); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a run whose lease was taken over goes on")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", cause)
	}
}
