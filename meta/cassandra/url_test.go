package cassandra

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url      string
		hosts    []string
		keyspace string
		o        Options
	}{
		{"cassandra://h1/ks", []string{"h1"}, "ks", Options{}},
		{"cassandra://h1,h2:9043,[::1]:9042/stratafs_1", []string{"h1", "h2:9043", "[::1]:9042"}, "stratafs_1", Options{}},
		{"cassandra://127.0.0.1:9042/ks?shards=64&consistency=quorum&replication=1", []string{"127.0.0.1:9042"}, "ks",
			Options{Shards: 64, Consistency: "quorum", Replication: "1"}},
		{"cassandra://h/ks?replication=dc1:3,dc2:2&namespace=a%2Fb&timeout=2s&shards=1", []string{"h"}, "ks",
			Options{Shards: 1, Replication: "dc1:3,dc2:2", Namespace: "a/b", Timeout: 2 * time.Second}},
		{"cassandra://lb:19042/ks?discover=false", []string{"lb:19042"}, "ks", Options{NoDiscovery: true}},
		{"cassandra://h1,h2/ks?discover=true", []string{"h1", "h2"}, "ks", Options{}},
	} {
		hosts, ks, o, err := ParseURL(c.url)
		if err != nil || !slices.Equal(hosts, c.hosts) || ks != c.keyspace || o != c.o {
			t.Errorf("ParseURL(%q) = %q, %q, %+v, %v; want %q, %q, %+v", c.url, hosts, ks, o, err, c.hosts, c.keyspace, c.o)
		}
	}
	for _, u := range []string{
		"tikv://h/ks", "cassandra://h", "cassandra://h/", "cassandra:///ks", "cassandra://h/KS", "cassandra://h/ks/x",
		"cassandra://u@h/ks", "cassandra://h:port/ks", "cassandra://h:0/ks", "cassandra://h,/ks", "cassandra://h/ks#f",
		"cassandra://h/ks?shards=3", "cassandra://h/ks?shards=2048", "cassandra://h/ks?shards=0", "cassandra://h/ks?timeout=soon",
		"cassandra://h/ks?timeout=-1s", "cassandra://h/ks?shard=64", "cassandra://h/ks?shards=2&shards=4", "cassandra://h/ks?x=%zz",
		"cassandra://h1,h2/ks?discover=false", "cassandra://h/ks?discover=no",
	} {
		if _, _, _, err := ParseURL(u); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("ParseURL(%q): %v, want ErrInvalidArgument", u, err)
		}
	}
}

func TestReplicationMap(t *testing.T) {
	for r, want := range map[string]string{
		"":            "{'class': 'SimpleStrategy', 'replication_factor': 1}",
		"3":           "{'class': 'SimpleStrategy', 'replication_factor': 3}",
		"dc1:3,dc2:2": "{'class': 'NetworkTopologyStrategy', 'dc1': 3, 'dc2': 2}",
	} {
		if got, err := replicationMap(r); err != nil || got != want {
			t.Errorf("replicationMap(%q) = %q, %v; want %q", r, got, err, want)
		}
	}
	for _, r := range []string{"0", "-1", "dc1", "dc1:0", "dc1:3,", "dc'1:3", "a:b"} {
		if _, err := replicationMap(r); !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("replicationMap(%q): %v, want ErrInvalidArgument", r, err)
		}
	}
}
