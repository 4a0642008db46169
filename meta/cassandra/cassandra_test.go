package cassandra

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/storetest"
)

// The tests run against a real Cassandra named by STRATAFS_CASSANDRA
// (host:port[,host:port…]); integration/cassandra.sh starts one on
// loopback. All of a run's stores share one keyspace, created by the
// first Open and dropped at the end: creating a keyspace and its tables
// costs about a second and dropping one up to three, against 50 ms for
// opening a store on an existing keyspace, and the suite opens about a
// hundred stores. Each store gets its own namespace instead; its buckets
// have fresh ids, so nothing else is shared.

// skipMsg says how to run what was skipped.
const skipMsg = `
************************************************************************
meta/cassandra: NOT TESTED against Apache Cassandra: STRATAFS_CASSANDRA
is not set. To run the contract suite on a real single-node Cassandra:

    integration/cassandra.sh start     # Java 17 and Maven; ~15 s
    STRATAFS_CASSANDRA=127.0.0.1:9042 go test ./meta/cassandra/
    integration/cassandra.sh stop

CI (.ci/run) always does this.
************************************************************************`

// keyspace is the run's keyspace.
var keyspace = "stratafs_test_" + randomHex(4)

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if hosts := os.Getenv("STRATAFS_CASSANDRA"); hosts != "" {
		if err := dropKeyspace(strings.Split(hosts, ",")); err != nil {
			fmt.Fprintf(os.Stderr, "drop keyspace %s: %v\n", keyspace, err)
		}
	}
	os.Exit(code)
}

// dropKeyspace drops the run's keyspace, if a test created it.
func dropKeyspace(hosts []string) error {
	c := gocql.NewCluster(hosts...)
	s, err := c.CreateSession()
	if err != nil {
		return err
	}
	defer s.Close()
	return s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
}

// cassandraHosts returns the hosts of the Cassandra to test against, and
// skips the test, loudly, when there is none. In CI a missing Cassandra
// fails the test: CI must never skip it.
func cassandraHosts(t testing.TB) []string {
	hosts := os.Getenv("STRATAFS_CASSANDRA")
	if hosts == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("STRATAFS_CASSANDRA is not set in CI: .ci/run must start Cassandra" + skipMsg)
		}
		t.Skip(skipMsg)
	}
	return strings.Split(hosts, ",")
}

var namespaces atomic.Int64

// namespace returns a namespace no other store of the run uses.
func namespace(t testing.TB) string {
	return fmt.Sprintf("%s#%d", t.Name(), namespaces.Add(1))
}

// openStore opens a store in a namespace of its own, closed when the
// test ends.
func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	hosts := cassandraHosts(t)
	o.Namespace = namespace(t)
	s, err := Open(t.Context(), hosts, keyspace, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*Store)
}

func TestStore(t *testing.T) {
	cassandraHosts(t) // skip once, not in every case
	storetest.Run(t, func(t *testing.T) meta.Store { return openStore(t, Options{}) })
}
