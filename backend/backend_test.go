package backend

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stratafs/stratafs/object"
)

func TestOpenDefaultAndURLs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{
		{Dir: dir},
		{Meta: "memory://", Data: "file://" + filepath.Join(dir, "other")},
		{Meta: "bolt://" + filepath.Join(dir, "x.db"), Data: "file://" + dir},
		{Meta: "memory://", Data: "file://" + filepath.Join(dir, "direct") + "?direct=true"},
	} {
		svc, closeAll, err := Open(c, object.Options{})
		if err != nil {
			t.Fatalf("open %+v: %v", c, err)
		}
		ctx := context.Background()
		if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		if _, err := svc.Put(ctx, "bkt", "k", strings.NewReader(strings.Repeat("x", 5000)), object.PutOptions{Size: -1}); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		obj, err := svc.Get(ctx, "bkt", "k", "", 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(obj.Body)
		obj.Body.Close()
		if !bytes.Equal(b, bytes.Repeat([]byte("x"), 5000)) {
			t.Fatalf("%+v: read back %d bytes", c, len(b))
		}
		if err := closeAll(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestBadURLs(t *testing.T) {
	for _, u := range []string{"", "bolt://", "cassandra-ish://x", "%zz", "tikv://", "tikv://pd:2379?bogus=1", "cassandra://", "cassandra://h/ks?shards=3"} {
		if _, err := OpenMeta(u); err == nil || !strings.Contains(err.Error(), "meta store URL") {
			t.Errorf("OpenMeta(%q) = %v", u, err)
		}
	}
	for _, u := range []string{"", "s4://b", "file://", "s3://", "s3://b?bogus=1", "s3://b?concurrency=0", "file:///tmp/x?direct=maybe", "file:///tmp/x?bogus=1", "file:///tmp/x?direct=1&direct=0"} {
		if _, err := OpenData(u, nil); err == nil || !strings.Contains(err.Error(), "chunk store URL") {
			t.Errorf("OpenData(%q) = %v", u, err)
		}
	}
}

func TestBoltIsLockedAgainstASecondProcess(t *testing.T) {
	dir := t.TempDir()
	_, closeAll, err := Open(Config{Dir: dir}, object.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	if _, _, err := Open(Config{Dir: dir}, object.Options{}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second open of a data directory: %v", err)
	}
}

// s3:// opens chunks in a remote bucket, with credentials from the usual
// AWS environment variables.
func TestOpenS3Data(t *testing.T) {
	b := s3mem.New()
	if err := b.CreateBucket("chunks"); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gofakes3.New(b, gofakes3.WithLogger(gofakes3.DiscardLog())).Server())
	defer ts.Close()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	reg := prometheus.NewRegistry()
	svc, closeAll, err := Open(Config{Meta: "memory://", Data: "s3://chunks/node1?endpoint=" + ts.URL, Metrics: reg}, object.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	ctx := context.Background()
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("x"), 5000) // past the inline limit: a chunk
	if _, err := svc.Put(ctx, "bkt", "k", bytes.NewReader(want), object.PutOptions{Size: -1}); err != nil {
		t.Fatal(err)
	}
	if objs, err := b.ListBucket("chunks", &gofakes3.Prefix{}, gofakes3.ListBucketPage{}); err != nil || len(objs.Contents) != 1 || !strings.HasPrefix(objs.Contents[0].Key, "node1/") {
		t.Fatalf("remote bucket after one PUT: %+v, %v; want one chunk under node1/", objs, err)
	}
	obj, err := svc.Get(ctx, "bkt", "k", "", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(obj.Body)
	obj.Body.Close()
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes", len(got))
	}
	if n, err := testutil.GatherAndCount(reg, "stratafs_data_s3_operations_total"); err != nil || n != 3 {
		t.Fatalf("%d series of stratafs_data_s3_operations_total, %v; want list, put and get", n, err)
	}
}

func TestLocalOptions(t *testing.T) {
	for q, want := range map[string]bool{"": false, "direct=true": true, "direct=1": true, "direct=false": false} {
		v, _ := url.ParseQuery(q)
		o, err := localOptions(v)
		if err != nil || o.DirectIO != want {
			t.Errorf("file:///d?%s: direct I/O %v (%v), want %v", q, o.DirectIO, err, want)
		}
	}
}
