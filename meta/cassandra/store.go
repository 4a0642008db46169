// Package cassandra is a meta.Store on Apache Cassandra (or ScyllaDB),
// through github.com/apache/cassandra-gocql-driver/v2.
//
// # Layout
//
// Records are stored as the blobs package meta marshals (protobuf), beside
// the few columns that queries and conditions need:
//
//	buckets     ((ns), name)                                  data
//	access_keys ((ns), id)                                    data
//	leases      ((ns), name)                                  data
//	checkpoints ((ns), name)                                  data
//	objects     ((bucket_id, shard), kind, key, version_id)   row | seq, null_id
//	uploads     ((bucket_id, shard), kind, key, upload_id, part)  data, state
//
// Buckets, access keys and leases live in one partition per namespace
// (Options), so that listing them is one ordered read, not a scan of the
// whole cluster; all are few. A bucket's rows and uploads are spread over
// bucket.Shards partitions, shard = fnv32a(key) mod Shards, so no
// partition grows with the bucket. Within a partition, kind 1 holds the
// version rows in (key, version id) order — newest first within a key,
// as ids are inverted timestamps — and kind 0 one head row per key. For
// uploads, kind 0 holds the upload records and kind 1 their parts.
//
// # Atomicity
//
// Cassandra has no transactions across partitions, and lightweight
// transactions (LWT, Paxos) only within one. Every row of a key lives in
// one partition, and so do an upload and its parts, so each mutation of
// one key, and each part upload, is one conditional batch in one
// partition: atomic, and isolated from every other write of that key.
// The key's head row (kind 0) carries a random token, seq, that every
// mutation of the key replaces under the condition IF seq = <the token it
// read>: a mutation reads the key's state (the head row and its first
// version rows) with a serial read, decides against it (Check, the null
// row, whether the row to delete exists, whether the key is left empty)
// and commits only if no other mutation of the key came between, else it
// reads again. The head row also names the key's null row, and exists
// exactly while the key has rows, so an emptied bucket has no rows at all.
//
// A Commit of several mutations is not atomic as a whole: it runs every
// mutation's checks first, then applies the mutations one by one, as
// meta.Store documents. A crash, or a concurrent writer that invalidates
// a later mutation's check in between, can leave a prefix applied.
// Completing a multipart upload writes the version row first and then
// moves the upload to Completed in its own partition: a Complete retried
// after a crash between the two finds its row and only finishes the
// upload, but an abort that slips in between leaves the row written and
// the Complete failed. A write racing DeleteBucket can land after the
// emptiness check, under the dead bucket's id, where nothing reads it.
//
// Every write goes through Paxos, plain PUTs included: the rule that a
// row once written under LWT is only ever changed under LWT (else a
// quorum read may see the older value) holds because there are no other
// writes. The one exception is DeleteBucket's removal of a deleted
// bucket's upload records, which nothing reads again. Paxos makes
// concurrent proposals on one partition retry one another; writers in one
// process therefore queue per partition before they propose.
//
// # Listing
//
// A scan reads each of the bucket's partitions through a cursor and
// merges them by (key, version id). Cursors read in pages, concurrently,
// and only when the merge needs them; a Seek moves only the cursors that
// are behind its target, and re-reads a partition only when the target
// lies beyond the page it holds. A delimiter listing thus skips a common
// prefix with at most one query per partition, and GET of a key's latest
// row reads one partition (of a missing key, all of them). There is no
// index of live heads: Live scans are meta.LiveIter over history, so
// deleted keys and old versions are read, not skipped.
package cassandra

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/bits"
	"net"
	"regexp"
	"strconv"
	"strings"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"

	"github.com/stratafs/stratafs/meta"
)

// Options tune a Store. The zero value is usable.
type Options struct {
	// Shards, if non-zero, is the shard count of the buckets this store
	// creates, replacing the one in the record (meta.NewBucket's
	// meta.DefaultShards): a power of two up to MaxShards. A bucket keeps
	// its count for life; callers use the record Bucket returns.
	Shards uint32
	// Consistency of reads and writes: a gocql consistency name such as
	// "quorum" (the default), "local_quorum" or "one". Lightweight
	// transactions use SERIAL, or LOCAL_SERIAL with a local_* level.
	Consistency string
	// Replication of the keyspace, used only when Open creates it: a
	// replication factor ("3", SimpleStrategy) or data centres with
	// theirs ("dc1:3,dc2:3", NetworkTopologyStrategy). Default "1".
	Replication string
	// Namespace separates stores that share a keyspace: each sees only
	// its own buckets and access keys (rows belong to bucket ids, which
	// never repeat). Default "default".
	Namespace string
	// Timeout bounds every call, and each page of a scan; past it the
	// call fails with meta.ErrUnavailable. Default 10s.
	Timeout time.Duration
	// NoDiscovery connects to the one host given and nowhere else: every
	// node address the cluster reports is taken to mean that host. For a
	// cluster reached through a proxy, load balancer or port forward,
	// where the nodes' own addresses are not reachable.
	NoDiscovery bool
}

// MaxShards bounds a bucket's shard count: a listing reads every shard.
const MaxShards = 1024

const (
	defaultTimeout   = 10 * time.Second
	defaultNamespace = "default"
)

// Store implements meta.Store on a Cassandra keyspace.
type Store struct {
	session *gocql.Session
	ns      string
	shards  uint32
	cons    gocql.Consistency
	serial  gocql.Consistency
	timeout time.Duration
	expired error // the cause of a call's context when timeout passes
	q       queries
	locks   stripes
}

var _ meta.Store = (*Store)(nil)

// Open connects to the cluster at hosts (host or host:port, port 9042 by
// default), creates keyspace and its tables if they are missing, adds
// columns that a newer version of this package defines, and returns the
// store. It fails with meta.ErrUnavailable if no host answers within the
// timeout.
//
// Open changes the schema only by adding: CREATE … IF NOT EXISTS, ALTER
// TABLE … ADD. Concurrent schema changes from several coordinators can
// conflict in Cassandra, so the first Open of a keyspace should not race
// another.
func Open(ctx context.Context, hosts []string, keyspace string, o Options) (meta.Store, error) {
	s, err := open(ctx, newCluster(hosts, o), keyspace, o)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// newCluster returns the driver configuration for hosts.
func newCluster(hosts []string, o Options) *gocql.ClusterConfig {
	c := gocql.NewCluster(hosts...)
	c.Timeout = timeout(o)
	c.ConnectTimeout = min(timeout(o), 5*time.Second)
	// A node that comes back is used again within seconds, not a minute.
	c.ReconnectInterval = 2 * time.Second
	c.ReconnectionPolicy = &gocql.ConstantReconnectionPolicy{MaxRetries: 3, Interval: time.Second}
	// Requests go to a replica of their partition, the same one each time:
	// Paxos rounds on one partition from one coordinator contend less.
	c.PoolConfig.HostSelectionPolicy = gocql.TokenAwareHostPolicy(gocql.RoundRobinHostPolicy(), gocql.DoNotShuffleReplicas())
	// Schema changes are waited for where they are made; the driver needs
	// keyspace metadata only, for token-aware routing.
	c.Metadata.CacheMode = gocql.KeyspaceOnly
	// Paxos assigns the timestamps of conditional writes, and every write
	// here is one.
	c.DefaultTimestamp = false
	if o.NoDiscovery && len(hosts) == 1 {
		// Not DisableInitialHostLookup: the driver would then keep the
		// host under a made-up id beside the one it learns when its
		// control connection reconnects, and a pool that lost its
		// connections under the first is never refilled.
		via := hosts[0]
		if _, _, err := net.SplitHostPort(via); err != nil {
			via = net.JoinHostPort(via, strconv.Itoa(c.Port))
		}
		c.AddressTranslator = gocql.AddressTranslatorFunc(func(ip net.IP, port int) (net.IP, int) {
			a, err := net.ResolveTCPAddr("tcp", via)
			if err != nil {
				return ip, port
			}
			return a.IP, a.Port
		})
	}
	return c
}

func timeout(o Options) time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return defaultTimeout
}

var (
	nameRe = regexp.MustCompile(`^[a-z0-9_]{1,48}$`)
	dcRe   = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)
)

// open is Open on a prepared driver configuration (tests replace its
// dialer to cut the connection).
func open(ctx context.Context, c *gocql.ClusterConfig, keyspace string, o Options) (*Store, error) {
	fail := func(err error) (*Store, error) {
		return nil, fmt.Errorf("open cassandra keyspace %s: %w", keyspace, err)
	}
	if !nameRe.MatchString(keyspace) {
		return fail(fmt.Errorf("keyspace name %q: want 1 to 48 of a-z, 0-9 and _: %w", keyspace, meta.ErrInvalidArgument))
	}
	if o.Shards != 0 && !validShards(o.Shards) {
		return fail(fmt.Errorf("shards %d: want a power of two up to %d: %w", o.Shards, MaxShards, meta.ErrInvalidArgument))
	}
	if o.NoDiscovery && len(c.Hosts) != 1 {
		return fail(fmt.Errorf("no discovery through %d hosts: want one: %w", len(c.Hosts), meta.ErrInvalidArgument))
	}
	ns := o.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	cons := gocql.Quorum
	if o.Consistency != "" {
		var err error
		if cons, err = gocql.ParseConsistencyWrapper(o.Consistency); err != nil || cons == gocql.Any || cons == gocql.Serial || cons == gocql.LocalSerial {
			return fail(fmt.Errorf("consistency %q: %w", o.Consistency, meta.ErrInvalidArgument))
		}
	}
	serial := gocql.Serial
	if cons == gocql.LocalQuorum || cons == gocql.LocalOne {
		serial = gocql.LocalSerial
	}
	replication, err := replicationMap(o.Replication)
	if err != nil {
		return fail(err)
	}
	c.Consistency, c.SerialConsistency = cons, serial
	t := timeout(o)
	s := &Store{
		ns:      ns,
		shards:  o.Shards,
		cons:    cons,
		serial:  serial,
		timeout: t,
		expired: fmt.Errorf("no answer from cassandra within %v: %w", t, meta.ErrUnavailable),
		q:       newQueries(keyspace),
		locks:   newStripes(),
	}
	// gocql does not take a context to connect; it gives up after its
	// connect timeout.
	if s.session, err = c.CreateSession(); err != nil {
		return fail(fmt.Errorf("connect to %s: %w: %w", strings.Join(c.Hosts, ","), meta.ErrUnavailable, err))
	}
	if err := s.ensureSchema(ctx, keyspace, replication); err != nil {
		s.session.Close()
		return fail(err)
	}
	return s, nil
}

// replicationMap turns Options.Replication into the keyspace's
// replication map literal.
func replicationMap(r string) (string, error) {
	if r == "" {
		r = "1"
	}
	bad := fmt.Errorf("replication %q: want a factor or dc:factor,…: %w", r, meta.ErrInvalidArgument)
	if n, err := strconv.Atoi(r); err == nil {
		if n < 1 {
			return "", bad
		}
		return fmt.Sprintf("{'class': 'SimpleStrategy', 'replication_factor': %d}", n), nil
	}
	m := "{'class': 'NetworkTopologyStrategy'"
	for _, dc := range strings.Split(r, ",") {
		name, f, ok := strings.Cut(dc, ":")
		n, err := strconv.Atoi(f)
		if !ok || err != nil || n < 1 || !dcRe.MatchString(name) {
			return "", bad
		}
		m += fmt.Sprintf(", '%s': %d", name, n)
	}
	return m + "}", nil
}

// A table is one table of the schema; columns maps each column to its
// CQL type, in the order CREATE TABLE lists them.
type table struct {
	name    string
	columns [][2]string
	key     string // PRIMARY KEY (…)
}

// schema is the current schema. Changing it is additive only: a new
// table, or a new column at the end of a table, which ensureSchema adds
// to tables made by older versions. Never rename, retype or drop.
var schema = []table{
	{"buckets", [][2]string{{"ns", "text"}, {"name", "text"}, {"data", "blob"}}, "(ns, name)"},
	{"access_keys", [][2]string{{"ns", "text"}, {"id", "text"}, {"data", "blob"}}, "(ns, id)"},
	{"leases", [][2]string{{"ns", "text"}, {"name", "text"}, {"data", "blob"}}, "(ns, name)"},
	{"objects", [][2]string{
		{"bucket_id", "bigint"}, {"shard", "int"}, {"kind", "tinyint"}, {"key", "blob"}, {"version_id", "blob"},
		{"row", "blob"}, {"seq", "blob"}, {"null_id", "blob"},
	}, "((bucket_id, shard), kind, key, version_id)"},
	{"uploads", [][2]string{
		{"bucket_id", "bigint"}, {"shard", "int"}, {"kind", "tinyint"}, {"key", "blob"}, {"upload_id", "blob"}, {"part", "int"},
		{"data", "blob"}, {"state", "tinyint"},
	}, "((bucket_id, shard), kind, key, upload_id, part)"},
	{"condemned_chunks", [][2]string{{"ns", "text"}, {"shard", "int"}, {"chunk", "blob"}, {"data", "blob"}}, "((ns, shard), chunk)"}, // ledger.go
	{"checkpoints", [][2]string{{"ns", "text"}, {"name", "text"}, {"data", "blob"}}, "(ns, name)"},                                   // checkpoint.go
}

// ensureSchema creates what is missing of the keyspace and its tables.
// Each statement has the store's timeout to itself: a schema change waits
// for the nodes to agree on it, which takes seconds.
func (s *Store) ensureSchema(ctx context.Context, keyspace, replication string) error {
	ddl := func(stmt string) error {
		if err := s.bounded(ctx, s.session.Query(stmt).ExecContext); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
		return nil
	}
	if err := ddl(fmt.Sprintf("CREATE KEYSPACE IF NOT EXISTS %s WITH replication = %s", keyspace, replication)); err != nil {
		return err
	}
	for _, t := range schema {
		var cols []string
		for _, c := range t.columns {
			cols = append(cols, c[0]+" "+c[1])
		}
		if err := ddl(fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s (%s, PRIMARY KEY %s)", keyspace, t.name, strings.Join(cols, ", "), t.key)); err != nil {
			return err
		}
		have := map[string]bool{}
		err := s.bounded(ctx, func(ctx context.Context) error {
			it := s.session.Query(`SELECT column_name FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?`,
				keyspace, t.name).IterContext(ctx)
			for col := ""; it.Scan(&col); {
				have[col] = true
			}
			return it.Close()
		})
		if err != nil {
			return fmt.Errorf("columns of %s.%s: %w", keyspace, t.name, err)
		}
		for _, c := range t.columns {
			if have[c[0]] {
				continue
			}
			err := ddl(fmt.Sprintf("ALTER TABLE %s.%s ADD %s %s", keyspace, t.name, c[0], c[1]))
			// Another Open may have added it meanwhile.
			if err != nil && !strings.Contains(err.Error(), "already exists") {
				return err
			}
		}
	}
	return nil
}

// bound limits ctx to the store's timeout, after which its cause is
// meta.ErrUnavailable.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, s.timeout, s.expired)
}

// bounded runs fn under the store's timeout and gives its error the meta
// sentinel it stands for.
func (s *Store) bounded(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	return s.wrap(ctx, fn(ctx))
}

// wrap gives err, from a call under ctx, the meta sentinel it stands for:
// the call's end (the caller's cancellation, or meta.ErrUnavailable when
// the store's timeout passed), meta.ErrUnavailable for every failure to
// reach enough replicas in time. Other errors (a query the server
// refused) pass unchanged.
//
// A context error while ctx is still live is another caller's: gocql
// prepares a statement once for all who want it at that moment, under the
// first one's context, and when that one gives up, all of them fail with
// its context's error. Seen when a cut-off cluster made one call give up
// and the next one joined its prepare. That is unavailability too.
func (s *Store) wrap(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, meta.ErrUnavailable) {
		return err
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(ctx), err)
	}
	if unavailable(err) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", meta.ErrUnavailable, err)
	}
	return err
}

// unavailable reports whether err means that the cluster, or enough of
// it, did not answer.
func unavailable(err error) bool {
	var (
		netErr    net.Error
		unavail   *gocql.RequestErrUnavailable
		overload  *gocql.RequestErrOverloaded
		boot      *gocql.RequestErrBootstrapping
		rtimeout  *gocql.RequestErrReadTimeout
		rfail     *gocql.RequestErrReadFailure
		wfail     *gocql.RequestErrWriteFailure
		wtimeout  *gocql.RequestErrWriteTimeout
		casUnkown *gocql.RequestErrCASWriteUnknown
	)
	for _, e := range []error{gocql.ErrNoConnections, gocql.ErrTimeoutNoResponse, gocql.ErrConnectionClosed,
		gocql.ErrNoStreams, gocql.ErrSessionClosed, gocql.ErrNoConnectionsStarted, gocql.ErrUnavailable} {
		if errors.Is(err, e) {
			return true
		}
	}
	return errors.As(err, &netErr) || errors.As(err, &unavail) || errors.As(err, &overload) ||
		errors.As(err, &boot) || errors.As(err, &rtimeout) || errors.As(err, &rfail) ||
		errors.As(err, &wfail) || errors.As(err, &wtimeout) || errors.As(err, &casUnkown)
}

// unknownOutcome reports whether a conditional write failed in a way that
// leaves open whether it was applied: the coordinator ran Paxos but did
// not hear back from enough replicas in time. The write may still take
// effect; callers read again and look for it.
func unknownOutcome(err error) bool {
	var (
		wtimeout   *gocql.RequestErrWriteTimeout
		casUnknown *gocql.RequestErrCASWriteUnknown
	)
	return errors.As(err, &wtimeout) || errors.As(err, &casUnknown)
}

// Close closes the session; calls in flight fail.
func (s *Store) Close() error {
	s.session.Close()
	return nil
}

// validShards reports whether n is a usable shard count.
func validShards(n uint32) bool {
	return n >= 1 && n <= MaxShards && bits.OnesCount32(n) == 1
}

// shards returns b's shard count, or an error if the record has none a
// store could have written.
func shards(b meta.Bucket) (uint32, error) {
	if !validShards(b.Shards) {
		return 0, fmt.Errorf("bucket %s has %d shards, want a power of two up to %d: %w", b.Name, b.Shards, MaxShards, meta.ErrInvalidArgument)
	}
	return b.Shards, nil
}

// shardOf returns the shard of key among n (a power of two).
func shardOf(key string, n uint32) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() & (n - 1))
}
