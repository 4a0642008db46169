// Package backend opens the stores a stratafs process runs on, from the
// URLs users give (--meta, --data) or, by default, the embedded pair under
// one data directory. It is the only place that knows every backend, so
// commands and tests open stores one way.
package backend

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/data/local"
	s3data "github.com/stratafs/stratafs/data/s3"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/cassandra"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/meta/kv/mem"
	"github.com/stratafs/stratafs/meta/kv/tikv"
	"github.com/stratafs/stratafs/object"
)

// Config names the stores. Empty URLs mean the embedded default under Dir:
// Dir/meta.db (bolt) and Dir/chunks (local files).
type Config struct {
	Dir  string // the data directory; also holds credentials and staging
	Meta string // bolt:///path, memory://, tikv://pd1:2379?prefix=p, cassandra://h1,h2/ks
	Data string // file:///path, s3://bucket/prefix?endpoint=http://host:port
	// Metrics gets the stores' Prometheus metrics, for those that have
	// some (s3://); none when nil.
	Metrics prometheus.Registerer
}

// Open opens both stores and the core over them. close releases both.
func Open(c Config, o object.Options) (svc *object.Service, close func() error, err error) {
	if c.Dir != "" {
		if err := os.MkdirAll(c.Dir, 0o700); err != nil {
			return nil, nil, fmt.Errorf("data directory: %w", err)
		}
	}
	m, err := OpenMeta(c.metaURL())
	if err != nil {
		return nil, nil, err
	}
	d, err := OpenData(c.dataURL(), c.Metrics)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	closeAll := func() error {
		derr := d.Close()
		if err := m.Close(); err != nil {
			return err
		}
		return derr
	}
	return object.New(m, d, o), closeAll, nil
}

func (c Config) metaURL() string {
	if c.Meta != "" {
		return c.Meta
	}
	return "bolt://" + filepath.Join(c.Dir, "meta.db")
}

func (c Config) dataURL() string {
	if c.Data != "" {
		return c.Data
	}
	return "file://" + c.Dir
}

// OpenMeta opens a meta store from its URL. A URL that names no store
// is meta.ErrInvalidArgument, which a store that fails to open is not.
func OpenMeta(rawURL string) (meta.Store, error) {
	// Host lists may hold IPv6 hosts, which url.Parse refuses: these
	// backends parse their own URLs.
	switch {
	case strings.HasPrefix(rawURL, "tikv://"):
		pds, prefix, err := tikv.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("meta store URL %q: %w", rawURL, err)
		}
		return tikv.Open(context.Background(), pds, prefix)
	case strings.HasPrefix(rawURL, "cassandra://"):
		hosts, keyspace, o, err := cassandra.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("meta store URL %q: %w", rawURL, err)
		}
		return cassandra.Open(context.Background(), hosts, keyspace, o)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("meta store URL %q: %v: %w", rawURL, err, meta.ErrInvalidArgument)
	}
	switch u.Scheme {
	case "bolt":
		if p := u.Host + u.Path; p != "" {
			return bolt.Open(p)
		}
	case "memory":
		return mem.New(), nil
	}
	return nil, fmt.Errorf("meta store URL %q: want bolt:///path/meta.db, memory://, tikv://pd1:2379,pd2:2379[?prefix=p] or cassandra://h1,h2/keyspace[?shards=64]: %w", rawURL, meta.ErrInvalidArgument)
}

// OpenData opens a chunk store from its URL; reg (if not nil) gets its
// metrics.
func OpenData(rawURL string, reg prometheus.Registerer) (data.Store, error) {
	if strings.HasPrefix(rawURL, "s3://") {
		o, err := s3data.ParseURL(rawURL)
		if err != nil {
			return nil, fmt.Errorf("chunk store URL %q: %v: %w", rawURL, err, meta.ErrInvalidArgument)
		}
		o.Registerer = reg
		return s3data.Open(context.Background(), o)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("chunk store URL %q: %v: %w", rawURL, err, meta.ErrInvalidArgument)
	}
	if p := u.Host + u.Path; u.Scheme == "file" && p != "" {
		o, err := localOptions(u.Query())
		if err != nil {
			return nil, fmt.Errorf("chunk store URL %q: %v: %w", rawURL, err, meta.ErrInvalidArgument)
		}
		return local.Open(p, o)
	}
	return nil, fmt.Errorf("chunk store URL %q: want file:///path[?direct=true] or s3://bucket/prefix[?endpoint=…]: %w", rawURL, meta.ErrInvalidArgument)
}

// localOptions reads the options of a file:// URL: direct=true writes
// chunk files with direct I/O (see local.Options).
func localOptions(q url.Values) (local.Options, error) {
	var o local.Options
	for k, vs := range q {
		if k != "direct" || len(vs) != 1 {
			return o, fmt.Errorf("unknown or repeated option %q (want direct=true|false)", k)
		}
		d, err := strconv.ParseBool(vs[0])
		if err != nil {
			return o, fmt.Errorf("direct=%q: want true or false", vs[0])
		}
		o.DirectIO = d
	}
	return o, nil
}
