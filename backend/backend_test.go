package backend

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stratafs/stratafs/object"
)

func TestOpenDefaultAndURLs(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []Config{
		{Dir: dir},
		{Meta: "memory://", Data: "file://" + filepath.Join(dir, "other")},
		{Meta: "bolt://" + filepath.Join(dir, "x.db"), Data: "file://" + dir},
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
	for _, u := range []string{"", "s4://b", "file://"} {
		if _, err := OpenData(u); err == nil || !strings.Contains(err.Error(), "chunk store URL") {
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
