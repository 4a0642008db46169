package gc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// bodies remembers every body written, by ETag: copies and renames keep
// the source's ETag, so every row's expected bytes can be found.
type bodies struct {
	mu sync.Mutex
	m  map[string][]byte
}

func (b *bodies) add(etag string, body []byte) {
	b.mu.Lock()
	b.m[etag] = body
	b.mu.Unlock()
}

func (b *bodies) get(etag string) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.m[etag]
}

// benign reports the errors a writer racing other writers and the
// collector may meet: its source was deleted or changed meanwhile, or
// the collector had already taken the chunks of a source deleted
// meanwhile (the guard refused the commit).
func benign(err error) bool {
	return err == nil || meta.IsNotFound(err) || errors.Is(err, meta.ErrConflict) || errors.Is(err, data.ErrNoSuchChunk)
}

// TestCollectWhileWriting runs the collector in a loop while writers put,
// copy, rename, delete and complete multipart copies over old chunks,
// then checks that every version left reads back byte for byte and that
// fsck finds nothing missing. In the unversioned bucket a rename removes
// its source row, so the chunks it shares move behind the collector's
// walk: the sweep must still never take them. Readers meanwhile open
// versions and read them slowly: a version once open reads back in full
// even when its row is replaced or removed while it is read.
func TestCollectWhileWriting(t *testing.T) {
	f := newFixture(t, func(m meta.Store) meta.Store { return slowStore{m} })
	f.bucket("ver", meta.Enabled, meta.LifecycleRule{ID: "nc", Enabled: true, NoncurrentDays: 1, ExpiredObjectDeleteMarker: true})
	f.bucket("unv", meta.Unversioned)
	buckets := []string{"ver", "unv"}
	const keys = 40
	key := func(r *rand.Rand) string { return fmt.Sprintf("k%02d", r.IntN(keys)) }
	seen := &bodies{m: map[string][]byte{}}
	var serial atomic.Int64
	put := func(bucket, key string) error {
		b := fmt.Appendf(nil, "%s/%s#%d:", bucket, key, serial.Add(1))
		b = bytes.Repeat(b, 2*chunkSize/len(b)+1)
		v, err := f.svc.Put(f.ctx, bucket, key, bytes.NewReader(b), object.PutOptions{Size: -1})
		if err == nil {
			seen.add(v.ETag, b)
		}
		return err
	}
	for _, b := range buckets {
		for i := range keys {
			if err := put(b, fmt.Sprintf("k%02d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What was written so far is old enough to collect once nothing
	// references it; what the writers write below is not.
	f.backdate(2 * time.Hour)

	rename := func(r *rand.Rand) error {
		src, dst := key(r), key(r)
		if src == dst {
			return nil
		}
		_, err := f.svc.Rename(f.ctx, buckets[r.IntN(2)], src, dst, "")
		return err
	}
	// renameListed renames as the mount does: the source known by its
	// attributes only, so the new row names the one whose chunks it
	// shares and the store reads them as it commits.
	renameListed := func(r *rand.Rand) error {
		b, src, dst := buckets[r.IntN(2)], key(r), key(r)
		if src == dst {
			return nil
		}
		st, err := f.svc.Stat(f.ctx, b, src)
		if err != nil || st.File == nil {
			return err
		}
		_, err = f.svc.RenameVersion(f.ctx, b, st.File, dst, "")
		return err
	}
	ops := []func(r *rand.Rand) error{
		func(r *rand.Rand) error { return put(buckets[r.IntN(2)], key(r)) },
		func(r *rand.Rand) error {
			_, err := f.svc.Copy(f.ctx, buckets[r.IntN(2)], key(r), buckets[r.IntN(2)], key(r), object.CopyOptions{})
			return err
		},
		rename, renameListed, rename, renameListed, // the likeliest to lose chunks: weigh them

		func(r *rand.Rand) error {
			_, err := f.svc.Delete(f.ctx, buckets[r.IntN(2)], key(r), object.DeleteOptions{})
			return err
		},
		func(r *rand.Rand) error { // a multipart upload of one copied part
			b, dst := buckets[r.IntN(2)], key(r)
			u, err := f.svc.CreateUpload(f.ctx, b, dst, object.UploadOptions{})
			if err != nil {
				return err
			}
			p, src, err := f.svc.CopyPart(f.ctx, b, dst, u.ID, 1, object.CopySource{Bucket: buckets[r.IntN(2)], Key: key(r), Length: -1})
			if err != nil {
				return errors.Join(err, f.svc.AbortUpload(f.ctx, b, dst, u.ID))
			}
			v, err := f.svc.CompleteUpload(f.ctx, b, dst, u.ID, []object.CompletedPart{{Number: 1, ETag: p.ETag}}, nil)
			if err == nil {
				seen.add(v.ETag, seen.get(src.ETag))
			}
			return err
		},
	}

	stop := make(chan struct{})
	var writers sync.WaitGroup
	var done, refused atomic.Int64
	for w := range 4 {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				err := ops[r.IntN(len(ops))](r)
				if !benign(err) {
					t.Errorf("writer: %v", err)
					return
				}
				if errors.Is(err, data.ErrNoSuchChunk) {
					refused.Add(1)
				}
				done.Add(1)
			}
		})
	}
	// Time flies: retention expires noncurrent versions as the writers
	// go, which keeps the versioned bucket small and collections quick;
	// and every chunk, even one whose row has not committed yet, ages
	// past the grace period over and over, so the sweep always has old
	// chunks to take and the writers always share old chunks.
	var ticker sync.WaitGroup
	ticker.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
				f.clock.set(f.clock.Now().Add(30 * time.Minute))
			}
			if i%10 == 0 {
				f.age(2 * time.Hour)
			}
		}
	})
	var reads atomic.Int64
	for w := range 2 {
		writers.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 2))
			for {
				select {
				case <-stop:
					return
				default:
				}
				b, k := buckets[r.IntN(2)], key(r)
				obj, err := f.svc.Get(f.ctx, b, k, "", 0, -1)
				if err != nil {
					if !benign(err) {
						t.Errorf("reader: %v", err)
						return
					}
					continue
				}
				p := make([]byte, chunkSize)
				got, err := io.ReadFull(obj.Body, p)
				time.Sleep(time.Duration(r.IntN(20)) * time.Millisecond) // the rest later, collections in between
				rest, rerr := io.ReadAll(obj.Body)
				obj.Body.Close()
				// A version written a moment ago may not be in seen yet.
				if want := seen.get(obj.ETag); want != nil && (err != nil || rerr != nil || !bytes.Equal(append(p[:got], rest...), want)) {
					t.Errorf("reader of %s/%s@%s: %d+%d bytes, %v, %v; want %d", b, k, obj.WireID(), got, len(rest), err, rerr, len(want))
					return
				}
				reads.Add(1)
			}
		})
	}
	var runs int
	var reclaimed, expired atomic.Int64
	var collector sync.WaitGroup
	collector.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			st, err := gc.Run(f.ctx, f.svc, gc.Options{Logger: quiet})
			if err != nil {
				t.Errorf("gc: %v", err)
				return
			}
			reclaimed.Add(st.Reclaimed)
			expired.Add(st.NoncurrentExpired)
			runs++
		}
	})
	time.Sleep(1500 * time.Millisecond)
	close(stop)
	writers.Wait()
	collector.Wait()
	ticker.Wait()
	f.collect(gc.Options{})
	t.Logf("%d writes (%d refused: their chunks were collected first), %d reads, %d collections, %d chunks reclaimed, %d versions expired",
		done.Load(), refused.Load(), reads.Load(), runs, reclaimed.Load(), expired.Load())
	if reclaimed.Load() == 0 || runs < 2 {
		t.Fatal("the collector collected nothing while the writers ran: the test proves nothing")
	}

	for _, b := range buckets {
		o := meta.VersionListOptions{}
		for {
			page, err := f.svc.ListVersions(f.ctx, b, o)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range page.Versions {
				if v.DeleteMarker {
					continue
				}
				got, err := f.read(b, v.Key, v.WireID())
				if want := seen.get(v.ETag); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s/%s@%s reads %d bytes, %v; want %d", b, v.Key, v.WireID(), len(got), err, len(want))
				}
			}
			if !page.IsTruncated {
				break
			}
			o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
		}
	}
	st, err := gc.Fsck(f.ctx, f.svc, gc.FsckOptions{Logger: quiet, Missing: func(m gc.Missing) {
		t.Errorf("fsck: %s/%s@%s names %s: %v", m.Bucket, m.Key, m.VersionID, m.Chunk, m.Err)
	}})
	if err != nil || st.Missing != 0 {
		t.Fatalf("fsck: %+v, %v", st, err)
	}
}

// slowStore yields to other goroutines at every row a scan returns, so
// that writers get to commit while the collector walks a bucket, as they
// do in a bucket of millions of rows.
type slowStore struct{ meta.Store }

func (s slowStore) Scan(ctx context.Context, b meta.Bucket, o meta.ScanOptions) meta.Iter {
	return slowIter{s.Store.Scan(ctx, b, o)}
}

type slowIter struct{ meta.Iter }

func (i slowIter) Next() bool {
	runtime.Gosched()
	return i.Iter.Next()
}
