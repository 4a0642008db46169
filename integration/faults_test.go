package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/meta/kv/tikv"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// A cutProxy forwards TCP connections to target until it is cut; then it
// closes its listener and every connection, as a stopped server would,
// until it is healed on the same address. Stalled, it keeps every
// connection open but passes no byte on, as a network that drops packets
// would, until it resumes. It stands between stratafs and the shared
// Cassandra, which must not be stopped.
type cutProxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]bool
	gate  chan struct{} // closed while bytes flow
}

func startProxy(t *testing.T, target string) *cutProxy {
	p := &cutProxy{t: t, target: target, addr: "127.0.0.1:0", gate: make(chan struct{})}
	close(p.gate)
	p.heal()
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.cut)
	return p
}

// heal listens again and forwards new connections.
func (p *cutProxy) heal() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy: %v", err)
	}
	p.mu.Lock()
	p.ln, p.conns = ln, map[net.Conn]bool{}
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *cutProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln == nil { // cut while dialling
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = true, true
	p.mu.Unlock()
	go p.pipe(u, c)
	p.pipe(c, u)
}

// pipe copies src to dst while the gate is open, and closes both at the
// end of either.
func (p *cutProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gate
			p.mu.Unlock()
			<-gate
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// stall stops passing bytes on; resume passes them again.
func (p *cutProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate = make(chan struct{})
}

func (p *cutProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

// cut closes the listener and every connection: new ones are refused.
func (p *cutProxy) cut() {
	p.resume() // lets stalled pipes see their connections closed
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln == nil {
		return
	}
	p.ln.Close()
	for c := range p.conns {
		c.Close()
	}
	p.ln, p.conns = nil, nil
}

// cassandraTarget returns the Cassandra to test against, skipping loudly
// when there is none.
func cassandraTarget(t *testing.T) string {
	hosts := os.Getenv("STRATAFS_CASSANDRA")
	const why = "the Cassandra fault test needs STRATAFS_CASSANDRA=host:port (integration/cassandra.sh starts one)"
	switch {
	case hosts == "" && os.Getenv("CI") != "":
		t.Fatal("STRATAFS_CASSANDRA is not set in CI: " + why)
	case hosts == "":
		t.Skip("SKIPPING: " + why)
	}
	return strings.Split(hosts, ",")[0]
}

// TestCassandraOutage runs `stratafs serve --mount` on Cassandra through
// a proxy and cuts the proxy mid-run: S3 requests answer 503
// ServiceUnavailable, file operations in the mount EIO, nothing hangs and
// the process stays up; a PUT whose body was streaming when the store
// went away leaves no version; once the proxy is back, everything works
// again without a restart. Then the proxy stalls, and the same holds, once
// the store's timeout passes.
func TestCassandraOutage(t *testing.T) {
	target := cassandraTarget(t)
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	defer recoverMust(t)
	keyspace := "stratafs_faults_" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() { dropKeyspaceAt(t, target, keyspace) })
	px := startProxy(t, target)
	// Calls give up after 2 s, and the driver reaches the cluster through
	// the proxy only.
	metaURL := fmt.Sprintf("cassandra://%s/%s?discover=false&timeout=2s&shards=4", px.addr, keyspace)

	bin := buildStratafs(t)
	dataDir := t.TempDir()
	stratafs(t, bin, dataDir, "--meta", metaURL, "bucket", "create", "bkt")
	stratafs(t, bin, dataDir, "--meta", metaURL, "bucket", "versioning", "bkt", "enabled")
	dir := t.TempDir()
	p := startServe(t, bin, dataDir, "--meta", metaURL, "--mount", "bkt:"+dir, "--gc-interval", "0")
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	waitMounted(t, dir)
	root := exported(t, strings.Join(p.stdout, "\n"))
	srv := &s3Server{url: p.endpoint, tr: &http.Transport{}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	checkOutage(ctx, t, srv, root, dir, px.cut, px.heal)

	// A network that drops packets: nothing is refused, nothing answers,
	// and calls give up at the store's timeout (timeout=2s in the URL).
	checkOutage(ctx, t, srv, root, dir, px.stall, px.resume)
	p.stop(t, syscall.SIGTERM)
}

// TestTiKVOutage stops the one store of an in-process TiKV mock cluster
// under an S3 endpoint and a mount of one core: the checks of
// TestCassandraOutage, with client-go's whole client between the core
// and the (simulated) servers.
func TestTiKVOutage(t *testing.T) {
	skipWithoutFUSE(t)
	m, err := tikv.NewStoppableMock("faults", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	d, err := local.Open(filepath.Join(base, "chunks"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close(); m.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	svc := object.New(m, d, object.Options{})
	if _, err := svc.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.SetVersioning(ctx, "bkt", meta.Enabled); err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s3.New(svc, s3.Config{
		Keys:          sigv4.StaticKeys{s3AccessKey: s3SecretKey},
		RootAccessKey: s3AccessKey,
		Logger:        slog.New(slog.DiscardHandler),
	}))
	t.Cleanup(ts.Close)
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mp, err := fs.Mount(ctx, svc, "bkt", dir, fs.Options{
		StagingDir: filepath.Join(base, "staging"), EntryTimeout: time.Second, AttrTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if mp.Unmount() != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		<-mp.Done()
	})
	srv := &s3Server{url: ts.URL, tr: &http.Transport{}}
	checkOutage(ctx, t, srv, rootCreds, dir, m.Stop, func() { noErr(t, m.Start()) })
}

// checkOutage takes the meta store of the server at srv, which mounts
// bucket bkt (versioned) on dir, away with down while a PUT streams its
// body: the PUT, and S3 PUT, GET and LIST after it, answer 503
// ServiceUnavailable with an S3 error body, and stat, read and
// write-and-fsync in the mount fail with EIO. It brings the store back
// with up: the same server answers again, both ways, and the PUT cut off
// left no version. ctx bounds every call, so that a hang fails the test.
func checkOutage(ctx context.Context, t *testing.T, srv *s3Server, creds aws.Credentials, dir string, down, up func()) {
	t.Helper()
	defer recoverMust(t)
	c := s3Test{t: t, ctx: ctx, c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: creds}
	})}
	c.put("bkt", "before.txt", []byte("written before the outage"))
	// A PUT whose body is streaming when the store goes away.
	half := halfWrittenPut(t, srv, creds, down, "bkt", "half.bin")
	eq(t, "a PUT cut off from the store: status", half.status, http.StatusServiceUnavailable)
	if !strings.Contains(string(half.body), "<Code>ServiceUnavailable</Code>") {
		t.Fatalf("a PUT cut off from the store answered %s", half.body)
	}

	_, err := c.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("during.txt"), Body: strings.NewReader("x")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	start := time.Now()
	_, err = c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before.txt")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	t.Logf("S3 GET answered 503 after %v", time.Since(start).Round(time.Millisecond))
	_, err = c.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("bkt")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")

	// The kernel's caches of before.txt expire after a second.
	time.Sleep(1500 * time.Millisecond)
	_, err = os.Stat(filepath.Join(dir, "before.txt"))
	fuseWantErrno(t, "stat while the store is away", err, syscall.EIO)
	_, err = os.ReadFile(filepath.Join(dir, "never-seen.txt"))
	fuseWantErrno(t, "read while the store is away", err, syscall.EIO)
	fuseWantErrno(t, "write and fsync while the store is away", fsyncedFile(filepath.Join(dir, "during.txt")), syscall.EIO)

	up()
	// The driver reconnects within seconds.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		_, err := c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before.txt")})
		if err == nil {
			t.Logf("S3 answers again %v after the store is back", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("S3 GET a minute after the store is back: %v", err)
		}
	}
	c.put("bkt", "after.txt", []byte("written after the outage"))
	_, body := c.get("bkt", "before.txt", "")
	eq(t, "before.txt over S3", string(body), "written before the outage")
	got, err := os.ReadFile(filepath.Join(dir, "after.txt"))
	if err != nil || string(got) != "written after the outage" {
		t.Fatalf("the mount reads after.txt as %q, %v", got, err)
	}
	noErr(t, fsyncedFile(filepath.Join(dir, "mounted.txt")))
	_, body = c.get("bkt", "mounted.txt", "")
	eq(t, "a file written in the mount after the outage, over S3", string(body), "from the mount")

	vs := must(c.c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: aws.String("bkt")}))
	var keys []string
	for _, v := range vs.Versions {
		keys = append(keys, *v.Key)
	}
	// during.txt may be there whole: the mount's journal commits what was
	// closed once the store answers again. half.bin must not.
	for _, k := range keys {
		if k == "half.bin" {
			t.Fatalf("the PUT cut off mid-body left a version: %q", keys)
		}
	}
	if got, err := os.ReadFile(filepath.Join(dir, "during.txt")); err == nil && string(got) != "from the mount" {
		t.Fatalf("during.txt holds %q", got)
	}
}

// fsyncedFile creates name in a mount and writes and fsyncs it, which
// commits it: the first error on the way.
func fsyncedFile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	_, err = f.WriteString("from the mount")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// halfWrittenPut PUTs 12 MiB (more than a chunk) to bucket/key, calls
// cut when 4 MiB are sent, and returns the answer.
func halfWrittenPut(t *testing.T, srv *s3Server, creds aws.Credentials, cut func(), bucket, key string) rawResponse {
	t.Helper()
	body := randomBytes(12<<20, 7)
	r := srv.build(t, rawRequest{method: http.MethodPut, path: "/" + bucket + "/" + key, body: body,
		payload: "UNSIGNED-PAYLOAD", creds: creds})
	pr, pw := io.Pipe()
	r.Body = pr
	go func() {
		pw.Write(body[:4<<20])
		// Let the server start on the body before the store goes.
		time.Sleep(300 * time.Millisecond)
		cut()
		pw.Write(body[4<<20:])
		pw.Close()
	}()
	return srv.send(t, r)
}

// dropKeyspaceAt drops a keyspace a test created, straight at Cassandra.
func dropKeyspaceAt(t *testing.T, host, keyspace string) {
	c := gocql.NewCluster(host)
	s, err := c.CreateSession()
	if err != nil {
		t.Logf("drop keyspace %s: %v", keyspace, err)
		return
	}
	defer s.Close()
	if err := s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec(); err != nil {
		t.Logf("drop keyspace %s: %v", keyspace, err)
	}
}
