package object

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// DefaultBucketTTL is how long a Service trusts a bucket record it read
// from the meta store, unless Options.BucketTTL says otherwise.
const DefaultBucketTTL = time.Second

// bucketCache keeps the bucket records the Service read, so that an
// object call does not read its bucket's record from the meta store every
// time (a lookup in the mount, a GET over S3). Changes made through this
// Service replace or drop the record at once; changes made by another
// process sharing the meta store (another gateway on the same Cassandra
// or TiKV, `stratafs bucket` against the same bolt file) are seen once
// the record is older than the TTL. Writes stay safe meanwhile where it
// matters most: a commit into a bucket deleted (or deleted and created
// again) elsewhere fails with meta.ErrNoSuchBucket, which drops the
// record, so the next call reads it again.
type bucketCache struct {
	mu sync.Mutex
	m  map[string]cachedBucket
	// gen counts changes of any record: a read from the store that
	// started before a change must not put its older record in the cache.
	gen uint64
}

type cachedBucket struct {
	b    meta.Bucket
	read time.Time // by the Service's clock
}

// bucket returns the named bucket, from the cache when its record is
// younger than the TTL, or meta.ErrNoSuchBucket.
func (s *Service) bucket(ctx context.Context, name string) (meta.Bucket, error) {
	ttl := s.opts.BucketTTL
	if ttl < 0 {
		return s.meta.Bucket(ctx, name)
	}
	now := s.opts.Now()
	c := s.buckets
	c.mu.Lock()
	e, ok := c.m[name]
	gen := c.gen
	c.mu.Unlock()
	// A clock that went back (a test's) does not make a record fresher.
	if age := now.Sub(e.read); ok && age >= 0 && age < ttl {
		return e.b, nil
	}
	b, err := s.meta.Bucket(ctx, name)
	if err != nil {
		if errors.Is(err, meta.ErrNoSuchBucket) {
			s.forgetBucket(name)
		}
		return meta.Bucket{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen == gen {
		if c.m == nil {
			c.m = map[string]cachedBucket{}
		}
		c.m[name] = cachedBucket{b: b, read: now}
	}
	return b, nil
}

// knowBucket records b, just written to the store by this Service.
func (s *Service) knowBucket(b meta.Bucket) {
	c := s.buckets
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if s.opts.BucketTTL < 0 {
		return
	}
	if c.m == nil {
		c.m = map[string]cachedBucket{}
	}
	c.m[b.Name] = cachedBucket{b: b, read: s.opts.Now()}
}

// forgetBucket drops the record of the named bucket, so that the next call
// reads it from the store.
func (s *Service) forgetBucket(name string) {
	c := s.buckets
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	delete(c.m, name)
}

// updateBucket changes the named bucket's record in the store, as
// meta.Store.UpdateBucket does, and keeps the cache in step.
func (s *Service) updateBucket(ctx context.Context, name string, fn func(*meta.Bucket) error) (meta.Bucket, error) {
	b, err := s.meta.UpdateBucket(ctx, name, fn)
	if err != nil {
		s.forgetBucket(name)
		return b, err
	}
	s.knowBucket(b)
	return b, nil
}
