package gc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// ErrLeaseLost ends a run whose lease another collector took over, or
// that could not be renewed for a whole time to live.
var ErrLeaseLost = errors.New("collector lease lost")

// releaseTimeout bounds giving the lease back when the run's context has
// ended.
const releaseTimeout = 10 * time.Second

// holdLease takes the collector's lease for o.Holder and renews it every
// third of its time to live until release is called. The context it
// returns is canceled, with ErrLeaseLost as its cause, when the lease is
// lost: a collector must stop before another one starts.
func holdLease(ctx context.Context, svc *object.Service, o Options) (context.Context, func(), error) {
	m := svc.Meta()
	if _, err := m.AcquireLease(ctx, LeaseName, o.Holder, svc.Now(), o.LeaseTTL); err != nil {
		return nil, nil, err
	}
	lctx, cancel := context.WithCancelCause(ctx)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(o.LeaseTTL / 3)
		defer t.Stop()
		renewed := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			_, err := m.AcquireLease(lctx, LeaseName, o.Holder, svc.Now(), o.LeaseTTL)
			switch {
			case err == nil:
				renewed = time.Now()
			case errors.Is(err, meta.ErrLeaseHeld) || time.Since(renewed) >= o.LeaseTTL:
				cancel(fmt.Errorf("%w: %w", ErrLeaseLost, err))
				return
			default:
				o.Logger.Warn("collector lease not renewed", "holder", o.Holder, "err", err)
			}
		}
	})
	release := func() {
		close(stop)
		wg.Wait()
		cancel(nil)
		rctx, done := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer done()
		if err := m.ReleaseLease(rctx, LeaseName, o.Holder); err != nil {
			o.Logger.Warn("collector lease not released", "holder", o.Holder, "err", err)
		}
	}
	return lctx, release, nil
}
