package cassandra

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

// TestWrap checks which errors become meta.ErrUnavailable, without a
// cluster: the fault tests reach these cases only by luck of timing.
func TestWrap(t *testing.T) {
	s := &Store{timeout: time.Millisecond, expired: fmt.Errorf("no answer: %w", meta.ErrUnavailable)}
	live := context.Background()
	gone, cancel := context.WithCancel(live)
	cancel()
	late, stop := s.bound(live)
	defer stop()
	<-late.Done()
	refused := errors.New("syntax error in CQL query")
	for _, c := range []struct {
		name        string
		ctx         context.Context
		err         error
		unavailable bool
		is          error
	}{
		{"no error", live, nil, false, nil},
		{"refused by the server", live, refused, false, refused},
		{"not found", live, gocql.ErrNotFound, false, gocql.ErrNotFound},
		{"no connections", live, gocql.ErrNoConnections, true, gocql.ErrNoConnections},
		{"write timeout", live, &gocql.RequestErrWriteTimeout{}, true, nil},
		{"another caller's cancelled prepare", live, fmt.Errorf("prepare: %w", context.Canceled), true, context.Canceled},
		{"another caller's expired prepare", live, context.DeadlineExceeded, true, context.DeadlineExceeded},
		{"our own cancellation", gone, context.Canceled, false, context.Canceled},
		{"our own timeout", late, context.DeadlineExceeded, true, context.DeadlineExceeded},
	} {
		got := s.wrap(c.ctx, c.err)
		if errors.Is(got, meta.ErrUnavailable) != c.unavailable {
			t.Errorf("%s: wrap(%v) = %v, ErrUnavailable %v, want %v", c.name, c.err, got, !c.unavailable, c.unavailable)
		}
		if c.is != nil && !errors.Is(got, c.is) {
			t.Errorf("%s: wrap(%v) = %v, which lost the original error", c.name, c.err, got)
		}
		if c.err == nil && got != nil {
			t.Errorf("%s: wrap(nil) = %v", c.name, got)
		}
	}
}
