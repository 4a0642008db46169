package integration

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
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
// again without a restart. Then the proxy stalls, and the same holds
// once the store's timeout passes.
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
	c := s3Test{t: t, ctx: context.Background(), c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: root}
	})}

	c.put("bkt", "before.txt", []byte("written before the outage"))
	// Bounds every call below: a hang fails the test instead of stalling it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// A PUT whose body is streaming when the store goes away.
	half := halfWrittenPut(t, srv, root, px, "bkt", "half.bin")
	eq(t, "a PUT cut off from the store: status", half.status, http.StatusServiceUnavailable)
	if !strings.Contains(string(half.body), "<Code>ServiceUnavailable</Code>") {
		t.Fatalf("a PUT cut off from the store answered %s", half.body)
	}

	_, err := c.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("during.txt"), Body: strings.NewReader("x")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	_, err = c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before.txt")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	_, err = c.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("bkt")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")

	// The kernel's caches of before.txt expire after a second.
	time.Sleep(1500 * time.Millisecond)
	_, err = os.Stat(filepath.Join(dir, "before.txt"))
	fuseWantErrno(t, "stat while the store is away", err, syscall.EIO)
	_, err = os.ReadFile(filepath.Join(dir, "never-seen.txt"))
	fuseWantErrno(t, "read while the store is away", err, syscall.EIO)
	fuseWantErrno(t, "write and fsync while the store is away", fsyncedFile(filepath.Join(dir, "during.txt")), syscall.EIO)
	if p.cmd.ProcessState != nil {
		t.Fatalf("serve exited during the outage: %v", p.cmd.ProcessState)
	}

	px.heal()
	// The driver reconnects within seconds.
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		_, err := c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("before.txt")})
		if err == nil {
			t.Logf("S3 answers again %v after the proxy is back", time.Since(start).Round(time.Millisecond))
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

	// A network that drops packets: nothing is refused, nothing answers.
	// Calls give up at the store's timeout (timeout=2s in the URL).
	px.stall()
	start := time.Now()
	_, err = c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("after.txt")})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	t.Logf("S3 GET answered 503 %v into a stall", time.Since(start).Round(time.Millisecond))
	_, err = os.Stat(filepath.Join(dir, "stalled.txt"))
	fuseWantErrno(t, "stat in a stall", err, syscall.EIO)
	px.resume()
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		_, err := c.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("after.txt")})
		if err == nil {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("S3 GET a minute after the stall ended: %v", err)
		}
	}
	p.stop(t, syscall.SIGTERM)
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

// halfWrittenPut PUTs 12 MiB (more than a chunk) to bucket/key and cuts
// the proxy when 4 MiB are sent; it returns the answer.
func halfWrittenPut(t *testing.T, srv *s3Server, creds aws.Credentials, px *cutProxy, bucket, key string) rawResponse {
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
		px.cut()
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
