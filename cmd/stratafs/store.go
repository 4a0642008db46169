package main

import (
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// openService opens the stores every command works on: those --meta and
// --data name, by default the embedded pair under the data directory
// (DIR/meta.db and DIR/chunks). A URL that names no store is a usage
// error; a store that cannot be reached is not. The stores register their
// metrics with reg when it is not nil.
func openService(e *env, reg prometheus.Registerer) (*object.Service, func() error, error) {
	svc, closeAll, err := backend.Open(backend.Config{Dir: e.dataDir, Meta: e.meta, Data: e.data, Metrics: reg}, object.Options{})
	if errors.Is(err, meta.ErrInvalidArgument) {
		return nil, nil, fmt.Errorf("%w: %w", err, errUsage)
	}
	return svc, closeAll, err
}
