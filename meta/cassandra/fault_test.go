package cassandra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// A cutDialer connects to the cluster until it is cut; then it closes
// every connection it made and refuses new ones, until it is healed. To
// the client that is the cluster going away: a crash, or a partition.
type cutDialer struct {
	mu    sync.Mutex
	down  bool
	conns []net.Conn
}

func (d *cutDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err == nil {
		d.conns = append(d.conns, c)
	}
	return c, err
}

func (d *cutDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = true
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

func (d *cutDialer) heal() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = false
}

// TestOpenUnreachable opens a store on a port nothing listens on: Open
// gives up within its timeout with meta.ErrUnavailable.
func TestOpenUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	start := time.Now()
	s, err := Open(t.Context(), []string{addr}, "stratafs", Options{Timeout: 2 * time.Second})
	if err == nil {
		s.Close()
		t.Fatalf("Open(%s) of a closed port succeeded", addr)
	}
	if !errors.Is(err, meta.ErrUnavailable) {
		t.Fatalf("Open(%s): %v, want ErrUnavailable", addr, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Open(%s) took %v to give up", addr, d)
	}
}

// TestUnavailable cuts the store off the cluster while a writer commits:
// every call fails promptly with meta.ErrUnavailable, nothing hangs, the
// store recovers once the cluster is back, every commit that succeeded is
// there, and of those that failed each is there whole or not at all.
func TestUnavailable(t *testing.T) {
	hosts := cassandraHosts(t)
	const timeout = 2 * time.Second
	o := Options{Namespace: namespace(t), Timeout: timeout}
	c := newCluster(hosts, o)
	d := &cutDialer{}
	c.Dialer = d
	s, err := open(t.Context(), c, keyspace, o)
	if err != nil {
		t.Fatal(err)
	}
	// Close waits for the driver's schema refresh, which after an outage
	// polls its dead connection for up to 10s.
	defer s.Close()
	ctx := t.Context()
	b, err := meta.NewBucket("fault", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b.Versioning = meta.Enabled
	if err := s.CreateBucket(ctx, b); err != nil {
		t.Fatal(err)
	}

	// The writer: one PUT after another until stopped.
	type attempt struct {
		v   *meta.Version
		err error
	}
	var (
		log  []attempt
		stop = make(chan struct{})
		done = make(chan struct{})
	)
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := &meta.Version{Key: fmt.Sprintf("w/%d", i%5), ID: meta.NewVersionID(time.Now()), ETag: fmt.Sprintf("%032x", i)}
			err := s.Commit(ctx, b, meta.PutMutation(b, v))
			log = append(log, attempt{v, err})
			if err != nil {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	time.Sleep(500 * time.Millisecond)
	d.cut()

	u := &meta.Upload{Key: "u", ID: meta.NewUploadID(time.Now())}
	id := meta.NewVersionID(time.Now())
	for _, op := range []struct {
		name string
		call func() error
	}{
		{"Commit", func() error { return s.Commit(ctx, b, meta.PutMutation(b, &meta.Version{Key: "k", ID: id})) }},
		{"Get", func() error { _, err := s.Get(ctx, b, "w/0", id); return err }},
		{"GetNull", func() error { _, err := s.GetNull(ctx, b, "w/0"); return err }},
		{"Latest", func() error { _, err := meta.Latest(ctx, s, b, "w/0"); return err }},
		{"List", func() error { _, err := meta.List(ctx, s, b, meta.ListOptions{Delimiter: "/"}); return err }},
		{"ListVersions", func() error { _, err := meta.ListVersions(ctx, s, b, meta.VersionListOptions{}); return err }},
		{"Bucket", func() error { _, err := s.Bucket(ctx, b.Name); return err }},
		{"Buckets", func() error { _, err := s.Buckets(ctx); return err }},
		{"CreateBucket", func() error { return s.CreateBucket(ctx, b) }},
		{"UpdateBucket", func() error {
			_, err := s.UpdateBucket(ctx, b.Name, func(*meta.Bucket) error { return nil })
			return err
		}},
		{"DeleteBucket", func() error { return s.DeleteBucket(ctx, b.Name) }},
		{"CreateUpload", func() error { return s.CreateUpload(ctx, b, u) }},
		{"PutPart", func() error { return s.PutPart(ctx, b, u.Key, u.ID, &meta.Part{Number: 1}) }},
		{"ListUploads", func() error { _, err := s.ListUploads(ctx, b, meta.UploadListOptions{}); return err }},
		{"AccessKey", func() error { _, err := s.AccessKey(ctx, "AKIA"); return err }},
		{"AcquireLease", func() error { _, err := s.AcquireLease(ctx, "gc", "me", time.Now(), time.Minute); return err }},
	} {
		start := time.Now()
		err := op.call()
		if !errors.Is(err, meta.ErrUnavailable) {
			t.Errorf("%s while cut off: %v, want ErrUnavailable", op.name, err)
		}
		d := time.Since(start)
		if d > timeout+time.Second {
			t.Errorf("%s while cut off took %v", op.name, d)
		}
		t.Logf("%s while cut off: %v: %v", op.name, d, err)
	}

	d.heal()
	healed := time.Now()
	deadline := healed.Add(30 * time.Second)
	for {
		_, err := s.Bucket(ctx, b.Name)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover within 30s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("recovered %v after the cluster came back", time.Since(healed))
	time.Sleep(300 * time.Millisecond) // the writer gets through again
	close(stop)
	<-done

	var ok, failed int
	for _, a := range log {
		got, err := s.Get(ctx, b, a.v.Key, a.v.ID)
		switch {
		case a.err == nil && err != nil:
			t.Errorf("a committed PUT of %s@%s is gone: %v", a.v.Key, a.v.ID, err)
		case a.err != nil && !errors.Is(a.err, meta.ErrUnavailable):
			t.Errorf("a PUT while cut off: %v, want ErrUnavailable", a.err)
		case err == nil && (got.ETag != a.v.ETag || got.Key != a.v.Key):
			t.Errorf("PUT of %s@%s reads back as %+v", a.v.Key, a.v.ID, got)
		case err != nil && !errors.Is(err, meta.ErrNoSuchVersion):
			t.Errorf("Get(%s@%s): %v", a.v.Key, a.v.ID, err)
		}
		if a.err == nil {
			ok++
		} else {
			failed++
		}
	}
	if ok == 0 || failed == 0 {
		t.Errorf("the writer had %d PUTs succeed and %d fail; want some of each", ok, failed)
	}
	// Every row in the bucket is one the writer wrote.
	rows, err := drainRows(s.Scan(ctx, b, meta.ScanOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[meta.VersionID]bool{}
	for _, a := range log {
		ids[a.v.ID] = true
	}
	for _, v := range rows {
		if !ids[v.ID] {
			t.Errorf("row %s@%s was never written", v.Key, v.ID)
		}
	}
	t.Logf("%d PUTs committed, %d failed while cut off; %d rows", ok, failed, len(rows))
}

func drainRows(it meta.Iter) ([]*meta.Version, error) {
	defer it.Close()
	var vs []*meta.Version
	for it.Next() {
		vs = append(vs, it.Version())
	}
	return vs, it.Err()
}
