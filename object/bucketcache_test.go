package object_test

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/cassandra"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/object"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// gateways returns two Services over one meta and chunk store, as two
// processes sharing a Cassandra or TiKV cluster would be, both on clock,
// with bucket "bkt" created through the first.
func gateways(t *testing.T, clock *fakeClock) (a, b *object.Service) {
	t.Helper()
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	o := object.Options{Now: clock.Now, ChunkSize: chunk}
	a, b = object.New(m, d, o), object.New(m, d, o)
	if _, err := a.CreateBucket(context.Background(), "bkt", ""); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// versions returns how many rows key has.
func versions(t *testing.T, svc *object.Service, key string) int {
	t.Helper()
	res, err := svc.ListVersions(context.Background(), "bkt", meta.VersionListOptions{Prefix: key, MaxKeys: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Versions)
}

func put(t *testing.T, svc *object.Service, key string) error {
	t.Helper()
	_, err := svc.Put(context.Background(), "bkt", key, strings.NewReader("x"), object.PutOptions{Size: 1})
	return err
}

func TestBucketCacheSeesOwnChangesAtOnce(t *testing.T) {
	ctx := context.Background()
	a, _ := gateways(t, &fakeClock{now: time.Unix(1e9, 0)})
	if err := put(t, a, "k"); err != nil { // reads, and caches, the record
		t.Fatal(err)
	}
	if _, err := a.SetVersioning(ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}
	if b, err := a.Bucket(ctx, "bkt"); err != nil || b.Versioning != meta.Enabled {
		t.Fatalf("bucket after SetVersioning: %+v, %v", b, err)
	}
	// Written as in an Enabled bucket: the null row stays beside the new one.
	if err := put(t, a, "k"); err != nil {
		t.Fatal(err)
	}
	if n := versions(t, a, "k"); n != 2 {
		t.Fatalf("k has %d rows after a put into the versioned bucket, want 2", n)
	}
	rules := []meta.LifecycleRule{{Enabled: true, NoncurrentDays: 1}}
	if _, err := a.SetLifecycle(ctx, "bkt", rules); err != nil {
		t.Fatal(err)
	}
	if b, err := a.Bucket(ctx, "bkt"); err != nil || len(b.Lifecycle) != 1 {
		t.Fatalf("bucket after SetLifecycle: %+v, %v", b, err)
	}
}

func TestBucketCacheDoesNotServeDeletedBucket(t *testing.T) {
	ctx := context.Background()
	a, _ := gateways(t, &fakeClock{now: time.Unix(1e9, 0)})
	if _, err := a.Bucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Bucket(ctx, "bkt"); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("Bucket of a deleted bucket: %v, want ErrNoSuchBucket", err)
	}
	if _, err := a.Head(ctx, "bkt", "k", ""); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("Head in a deleted bucket: %v, want ErrNoSuchBucket", err)
	}
	if err := put(t, a, "k"); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("Put into a deleted bucket: %v, want ErrNoSuchBucket", err)
	}
}

func TestBucketCacheSeesOtherProcessWithinTTL(t *testing.T) {
	ctx := context.Background()
	clock := &fakeClock{now: time.Unix(1e9, 0)}
	a, b := gateways(t, clock)
	if _, err := a.Bucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SetVersioning(ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}
	// Within the TTL a may still act on the record it read.
	clock.advance(object.DefaultBucketTTL / 2)
	if got, _ := a.Bucket(ctx, "bkt"); got.Versioning != meta.Unversioned {
		t.Fatalf("record re-read within the TTL (%s): the cache is not used", got.Versioning)
	}
	clock.advance(object.DefaultBucketTTL / 2)
	if got, err := a.Bucket(ctx, "bkt"); err != nil || got.Versioning != meta.Enabled {
		t.Fatalf("after the TTL: %s, %v; want enabled", got.Versioning, err)
	}
	for range 2 {
		if err := put(t, a, "k"); err != nil {
			t.Fatal(err)
		}
	}
	if n := versions(t, b, "k"); n != 2 {
		t.Fatalf("k has %d rows after two puts once the change was seen, want 2", n)
	}
}

func TestBucketCacheDropsBucketDeletedElsewhere(t *testing.T) {
	ctx := context.Background()
	a, b := gateways(t, &fakeClock{now: time.Unix(1e9, 0)})
	if _, err := a.Bucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	// a's record names the old bucket: the commit refuses it, and the
	// record is dropped at once, clock or no clock.
	if err := put(t, a, "k"); !errors.Is(err, meta.ErrNoSuchBucket) {
		t.Fatalf("put through a stale record: %v, want ErrNoSuchBucket", err)
	}
	if err := put(t, a, "k"); err != nil {
		t.Fatalf("put after the stale record was dropped: %v", err)
	}
	if _, err := b.Head(ctx, "bkt", "k", ""); err != nil {
		t.Fatalf("the new bucket does not hold k: %v", err)
	}
}

// reshardingStore is a meta store that, like Cassandra opened with
// shards=N, gives every bucket it creates a shard count of its own.
type reshardingStore struct {
	meta.Store
	shards uint32
}

func (s reshardingStore) CreateBucket(ctx context.Context, b meta.Bucket) error {
	b.Shards = s.shards
	return s.Store.CreateBucket(ctx, b)
}

// TestCreateBucketCachesTheStoredRecord: the record CreateBucket returns
// and caches is the one the store kept, not the one it was given.
func TestCreateBucketCachesTheStoredRecord(t *testing.T) {
	m := mem.New()
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	const shards = 8 // not meta.DefaultShards
	svc := object.New(reshardingStore{m, shards}, d, object.Options{ChunkSize: chunk})
	ctx := t.Context()
	created, err := svc.CreateBucket(ctx, "bkt", "")
	if err != nil {
		t.Fatal(err)
	}
	cached, err := svc.Bucket(ctx, "bkt")
	if err != nil {
		t.Fatal(err)
	}
	if created.Shards != shards || cached.Shards != shards {
		t.Fatalf("shards returned by CreateBucket %d, by Bucket %d; the store kept %d", created.Shards, cached.Shards, shards)
	}
}

// TestCreateBucketThenWriteCassandra writes into a bucket at once after
// creating it, on a Cassandra store whose shard count is not the default:
// the store refuses a commit with any record but the one it kept.
func TestCreateBucketThenWriteCassandra(t *testing.T) {
	hosts := os.Getenv("STRATAFS_CASSANDRA")
	if hosts == "" {
		t.Skip("SKIPPING: set STRATAFS_CASSANDRA=host:port to run against Cassandra")
	}
	o := cassandra.Options{Shards: 8, Namespace: "object-" + strings.ToLower(rand.Text()[:8])}
	m, err := cassandra.Open(t.Context(), strings.Split(hosts, ","), "stratafs_object_test", o)
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	svc := object.New(m, d, object.Options{ChunkSize: chunk})
	ctx := t.Context()
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if err := put(t, svc, "k"); err != nil {
		t.Fatalf("put right after CreateBucket: %v", err)
	}
	if _, err := svc.Delete(ctx, "bkt", "k", object.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
}
