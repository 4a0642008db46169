package integration

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/stratafs/stratafs/data/storetest"
)

// attrTimeout is how long a mount may show what another gateway changed
// (serve's --attr-timeout and --entry-timeout, 1 s by default); the test
// allows a few seconds more for the deleting gateway's queued commit.
const attrTimeout = time.Second

// TestMultiNode runs three processes of the real binary. Node A is
// `stratafs serve` on the embedded default and holds, in a bucket of its
// own, the chunks of nodes B and C; B and C are `stratafs serve --mount`
// over one Cassandra keyspace (meta) and A's bucket (data), each with its
// own port and mount. What one gateway writes, the other reads, over S3
// and in its mount; a delete on one is seen by the other within the
// attribute timeout; concurrent PUTs of one key through both keep every
// version, and both agree on the latest.
func TestMultiNode(t *testing.T) {
	hosts := os.Getenv("STRATAFS_CASSANDRA")
	if hosts == "" {
		const msg = "SKIPPING MULTI-NODE TEST: STRATAFS_CASSANDRA is not set; run integration/cassandra.sh start, then STRATAFS_CASSANDRA=127.0.0.1:9042; CI runs it"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	defer recoverMust(t)
	bin := buildStratafs(t)

	// Node A, and a key of the other nodes' own that owns the bucket.
	dirA := t.TempDir()
	key := exported(t, stratafs(t, bin, dirA, "key", "create", "--name", "nodes"))
	a := startServe(t, bin, dirA, "--gc-interval", "0")
	ca := nodeClient(t, a.endpoint, key)
	ca.createBucket("chunks")

	b, c := startGateways(t, bin, strings.Split(hosts, ","), a.endpoint, key)

	// Written through B, over S3 and in B's mount (fsync: committed when
	// it returns); more than a chunk, so that reads cross chunks on A.
	viaS3 := storetest.Random(1, 9<<20)
	viaMount := storetest.Random(2, 1<<20)
	start := time.Now()
	b.c.put("shared", "from-b/s3.bin", viaS3)
	putTook := time.Since(start)
	noErr(t, writeSynced(filepath.Join(b.dir, "from-b", "mount.bin"), viaMount))
	// The chunk store's metrics reach serve's /metrics.
	if m := b.metrics(t); !strings.Contains(m, `stratafs_data_s3_operations_total{operation="put",outcome="ok"}`) {
		t.Errorf("B's metrics lack the chunk store's puts:\n%s", m)
	}

	// Read through C, over S3 and in C's mount.
	for key, want := range map[string][]byte{"from-b/s3.bin": viaS3, "from-b/mount.bin": viaMount} {
		start := time.Now()
		_, got := c.c.get("shared", key, "")
		if key == "from-b/s3.bin" {
			t.Logf("9 MiB through B, chunks on A: PUT %v, GET through C %v", putTook.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("C's S3 GET of %s: %d bytes, not those written through B", key, len(got))
		}
		start = time.Now()
		got, err := os.ReadFile(filepath.Join(c.dir, key))
		if key == "from-b/s3.bin" {
			t.Logf("9 MiB read in C's mount: %v", time.Since(start).Round(time.Millisecond))
		}
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("C's mount reads %s: %d bytes, %v; not those written through B", key, len(got), err)
		}
	}
	chunks := ca.keys("chunks", "nodes/", 1000)
	if len(chunks) < 3 {
		t.Fatalf("A's bucket holds %d chunks under nodes/, want at least 3 (two for 9 MiB, one for 1 MiB)", len(chunks))
	}

	// B's kernel caches both names; C deletes them, one over S3, one in
	// its mount.
	for _, name := range []string{"s3.bin", "mount.bin"} {
		if _, err := os.Stat(filepath.Join(b.dir, "from-b", name)); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	c.c.del("shared", "from-b/s3.bin", "")
	if err := os.Remove(filepath.Join(c.dir, "from-b", "mount.bin")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"from-b/s3.bin", "from-b/mount.bin"} {
		within(t, attrTimeout+4*time.Second, "B's S3 GET of "+key+" answers NoSuchKey", func() bool {
			return hasCode(b.c.getErr("shared", key, ""), "NoSuchKey")
		})
		within(t, attrTimeout+4*time.Second, "B's mount no longer shows "+key, func() bool {
			_, err := os.Stat(filepath.Join(b.dir, key))
			return errors.Is(err, fs.ErrNotExist)
		})
	}
	t.Logf("deletes on C seen by B's S3 and mount after %v", time.Since(deleted).Round(time.Millisecond))

	racePuts(t, b, c)
	putGetFigures(t, b)
	chunkStoreDown(t, bin, dirA, a, b, c)

	// fsck, beside the running gateways, walks A's bucket (ListObjectsV2)
	// and finds every chunk the rows name.
	out := stratafs(t, bin, t.TempDir(), "fsck")
	m := regexp.MustCompile(`buckets, (\d+) chunks`).FindStringSubmatch(out)
	if m == nil || m[1] == "0" || strings.Contains(out, "missing") {
		t.Fatalf("fsck over chunks on A:\n%s", out)
	}
	t.Logf("fsck: %s", strings.SplitN(out, "\n", 2)[0])
}

// gateway is node B or C: its process, mount point and S3 client.
type gateway struct {
	*servedProcess
	dir string
	c   s3Test
}

// startGateways starts B and C over a fresh keyspace of the Cassandra at
// hosts (dropped when the test ends) and chunks in A's bucket, reached
// with key, and creates the versioned bucket they mount.
func startGateways(t *testing.T, bin string, hosts []string, endpointA string, key aws.Credentials) (b, c *gateway) {
	t.Helper()
	keyspace := "stratafs_multinode_" + strings.ToLower(rand.Text()[:8])
	t.Cleanup(func() {
		cl := gocql.NewCluster(hosts...)
		s, err := cl.CreateSession()
		if err == nil {
			err = s.Query("DROP KEYSPACE IF EXISTS " + keyspace).Exec()
			s.Close()
		}
		if err != nil {
			t.Logf("drop keyspace %s: %v", keyspace, err)
		}
	})
	// The processes started from here on inherit these.
	t.Setenv("STRATAFS_META", "cassandra://"+strings.Join(hosts, ",")+"/"+keyspace)
	// Two tries: when A is down on purpose, B gives up within seconds.
	t.Setenv("STRATAFS_DATA", "s3://chunks/nodes?max_attempts=2&endpoint="+endpointA)
	t.Setenv("AWS_ACCESS_KEY_ID", key.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", key.SecretAccessKey)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")

	dirB := t.TempDir()
	stratafs(t, bin, dirB, "bucket", "create", "shared")
	stratafs(t, bin, dirB, "bucket", "versioning", "shared", "enabled")
	start := func(dataDir string) *gateway {
		mnt := t.TempDir()
		p := startServe(t, bin, dataDir, "--mount", "shared:"+mnt, "--gc-interval", "0", "--metrics-listen", "127.0.0.1:0")
		// Runs before the process is killed: a failed test leaves no mount.
		t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
		waitMounted(t, mnt)
		return &gateway{servedProcess: p, dir: mnt, c: nodeClient(t, p.endpoint, exported(t, strings.Join(p.stdout, "\n")))}
	}
	return start(dirB), start(t.TempDir())
}

// nodeClient returns an SDK client of a served process, path-style.
func nodeClient(t *testing.T, endpoint string, key aws.Credentials) s3Test {
	srv := &s3Server{url: endpoint, tr: &http.Transport{}}
	return s3Test{t: t, ctx: t.Context(), c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: key}
	})}
}

// writeSynced writes a file in a mount and fsyncs it: its version is
// committed, for every gateway to see, when this returns nil.
func writeSynced(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// within polls cond until it holds, failing the test if it does not
// within d.
func within(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", d, what)
		}
	}
}

func hasCode(err error, code string) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == code
}

// racePuts PUTs one key 20 times through B and 20 times through C at
// once: all 40 versions are kept, and both gateways name the same latest.
func racePuts(t *testing.T, b, c *gateway) {
	t.Helper()
	const key, each = "race/k", 20
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for _, g := range []*gateway{b, c} {
		wg.Go(func() {
			for i := range each {
				out, err := g.c.c.PutObject(g.c.ctx, &awss3.PutObjectInput{
					Bucket: aws.String("shared"), Key: aws.String(key),
					Body: strings.NewReader(fmt.Sprintf("%s put %d", g.endpoint, i)),
				})
				if err != nil {
					t.Errorf("PUT %d through %s: %v", i, g.endpoint, err)
					return
				}
				mu.Lock()
				ids = append(ids, aws.ToString(out.VersionId))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	var latest []string
	for _, g := range []*gateway{b, c} {
		rows := g.c.versions("shared", 1000)
		var got []string
		for _, r := range rows {
			k, v, _ := strings.Cut(strings.TrimSuffix(r, "*"), "@")
			if k == key {
				got = append(got, v)
			}
			if k == key && strings.HasSuffix(r, "*") {
				latest = append(latest, v)
			}
		}
		sort.Strings(got)
		if want := slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
			t.Fatalf("%s lists %d versions of %s, want the %d PUT answered with", g.endpoint, len(got), key, len(want))
		}
		out, body := g.c.get("shared", key, "")
		latest = append(latest, aws.ToString(out.VersionId)+" "+string(body))
	}
	// Latest by listing through B and C, then by GET through B and C.
	if len(latest) != 4 || latest[0] != latest[2] || latest[1] != latest[3] || !strings.HasPrefix(latest[1], latest[0]+" ") {
		t.Fatalf("B and C disagree on the latest version of %s: %q", key, latest)
	}
}

// putGetFigures logs the latency of PUT and GET through B, whose chunks
// go to A over S3: figures for the report, never asserted.
func putGetFigures(t *testing.T, b *gateway) {
	for _, size := range []int{4 << 10, 1 << 20} {
		body := storetest.Random(3, size)
		var puts, gets []time.Duration
		for i := range 10 {
			key := fmt.Sprintf("figures/%d/%d", size, i)
			start := time.Now()
			b.c.put("shared", key, body)
			puts = append(puts, time.Since(start))
			start = time.Now()
			b.c.get("shared", key, "")
			gets = append(gets, time.Since(start))
		}
		t.Logf("%d KiB through B (median of 10; 4 KiB is kept in the row, 1 MiB is a chunk on A): PUT %v, GET %v",
			size>>10, median(puts), median(gets))
	}
}

func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2].Round(10 * time.Microsecond)
}

// chunkStoreDown stops A, the chunk store: B's writes that need a chunk
// fail cleanly (S3 503 ServiceUnavailable, EIO from fsync in the mount)
// while B stays up and takes what needs none (a small object lives in its
// row); once A is back on its address, B writes chunks again and C reads
// them.
func chunkStoreDown(t *testing.T, bin, dirA string, a *servedProcess, b, c *gateway) {
	t.Helper()
	a.stop(t, syscall.SIGTERM)
	big := storetest.Random(4, 1<<20)
	_, err := b.c.c.PutObject(b.c.ctx, &awss3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String("down/s3.bin"), Body: bytes.NewReader(big)})
	wantErr(t, err, http.StatusServiceUnavailable, "ServiceUnavailable")
	t.Logf("B's PUT with A down: %v", err)
	if err := writeSynced(filepath.Join(b.dir, "down", "mount.bin"), big); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a 1 MiB file written and fsynced in B's mount with A down: %v; want EIO", err)
	}
	b.c.put("shared", "down/small", []byte("kept in its row"))

	back := time.Now()
	// A runs on the embedded default, not on the gateways' stores.
	meta, data := os.Getenv("STRATAFS_META"), os.Getenv("STRATAFS_DATA")
	t.Setenv("STRATAFS_META", "")
	t.Setenv("STRATAFS_DATA", "")
	startServe(t, bin, dirA, "--listen", strings.TrimPrefix(a.endpoint, "http://"), "--gc-interval", "0")
	t.Setenv("STRATAFS_META", meta)
	t.Setenv("STRATAFS_DATA", data)
	b.c.put("shared", "down/s3.bin", big)
	noErr(t, writeSynced(filepath.Join(b.dir, "down", "after.bin"), big))
	t.Logf("B writes chunks again %v after A restarted", time.Since(back).Round(time.Millisecond))
	for _, key := range []string{"down/s3.bin", "down/after.bin"} {
		if _, got := c.c.get("shared", key, ""); !bytes.Equal(got, big) {
			t.Fatalf("C reads %s: %d bytes, not those B wrote", key, len(got))
		}
	}
}
