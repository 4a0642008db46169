package tikv

import (
	"fmt"
	"sync"
	"time"

	"github.com/pingcap/failpoint"
	"github.com/tikv/client-go/v2/testutils"
	"github.com/tikv/client-go/v2/tikv"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv"
)

// A Mock is a meta store on an in-process mock cluster whose one TiKV
// store can be stopped and started again, so that tests of the layers
// above can take the meta store away mid-run. For tests.
type Mock struct {
	meta.Store
	cluster *testutils.MockCluster
	store   uint64
}

// enableFailpoints switches client-go's failpoints on, once: it reads the
// switch unguarded, so it must be set before a client of this process
// runs, and never again.
var enableFailpoints = sync.OnceFunc(tikv.EnableFailpoints)

// NewStoppableMock is NewMock whose calls give up after timeout, and that
// can be stopped. It must be the first TiKV client of the process (see
// enableFailpoints).
func NewStoppableMock(prefix string, timeout time.Duration) (*Mock, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, fmt.Errorf("mock TiKV meta store: %w", err)
	}
	enableFailpoints()
	s, c, err := newMockCluster()
	if err != nil {
		return nil, fmt.Errorf("mock TiKV meta store: %w", err)
	}
	return &Mock{Store: kv.New(newMockEngine(s, prefix, timeout)), cluster: c, store: c.GetAllStores()[0].GetId()}, nil
}

// Stop stops the cluster's only store: every call fails with
// meta.ErrUnavailable within the timeout.
func (m *Mock) Stop() { m.cluster.StopStore(m.store) }

// Start starts the store again. The client's region cache takes it for
// dead until a health check (a gRPC call to its address) answers; the
// mock's stores have no address, so from now on the checks of this
// process are answered for them.
func (m *Mock) Start() error {
	m.cluster.StartStore(m.store)
	return failpoint.Enable("tikvclient/injectLiveness", `return("reachable")`)
}
