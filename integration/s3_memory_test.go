package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// memoryUploadEnv sets the size of TestServeMultipartMemory's upload in
// MiB (default 384, more than memoryBound, so that a server that held
// the object in memory would fail); `STRATAFS_S3_MEMORY_MIB=1024 go test -run
// TestServeMultipartMemory ./integration` is the 1 GiB run.
const memoryUploadEnv = "STRATAFS_S3_MEMORY_MIB"

const (
	memoryPartSize = 16 << 20
	memoryWorkers  = 4 // parts in flight at once, as the aws CLI and rclone send them
	// memoryBound is the most the server's peak RSS may grow by while an
	// upload of any size goes through it in memoryWorkers parts at a
	// time, and is read back: half of DESIGN.md's 64 MiB. Over local
	// chunk files each part in flight streams to them through 1 MiB of
	// buffers in the core (4 MiB for 4), and a GET goes through none
	// (sendfile); the rest is net/http's buffers, the garbage collector's
	// headroom (GOGC=100 lets the heap reach twice what is live) and the
	// runtime's own: the server grew by 5–6 MiB. A part held in chunk
	// buffers (3 of 8 MiB) would take 96 MiB for 4.
	memoryBound = 32 << 20
)

// procMemory reads the peak (VmHWM) and current (VmRSS) resident set of
// a process, in bytes.
func procMemory(t *testing.T, pid int) (peak, rss int64) {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, _ := strings.Cut(sc.Text(), ":")
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case name != "VmHWM" && name != "VmRSS":
		case err != nil:
			t.Fatalf("/proc/%d/status: %s: %v", pid, sc.Text(), err)
		case name == "VmHWM":
			peak = kb << 10
		default:
			rss = kb << 10
		}
	}
	if peak == 0 || rss == 0 {
		t.Fatalf("/proc/%d/status has no VmHWM or VmRSS", pid)
	}
	return peak, rss
}

// memoryPart is part n's bytes, the same for every call with n.
func memoryPart(buf []byte, n int32) []byte {
	rand.NewChaCha8([32]byte{byte(n), byte(n >> 8)}).Read(buf)
	return buf
}

// TestServeMultipartMemory uploads an object in parts through the real
// server, measures how much the server process's peak resident set grew
// meanwhile, and reads the object back: the server streams every part
// to chunks, so its memory stays bounded whatever the object's size.
func TestServeMultipartMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and uploads 384 MiB")
	}
	mib := 384
	if v := os.Getenv(memoryUploadEnv); v != "" {
		var err error
		if mib, err = strconv.Atoi(v); err != nil || mib < 8 {
			t.Fatalf("%s=%q: want a number of MiB, at least 8", memoryUploadEnv, v)
		}
	}
	size := int64(mib) << 20
	p := startServe(t, buildStratafs(t), t.TempDir())
	srv := &s3Server{url: p.endpoint, tr: &http.Transport{MaxIdleConnsPerHost: memoryWorkers}}
	c := s3Test{t: t, ctx: context.Background(), c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: exported(t, strings.Join(p.stdout, "\n"))}
	})}
	defer recoverMust(t)
	c.createBucket("memory")
	pid := p.cmd.Process.Pid
	peak0, rss0 := procMemory(t, pid)

	id := c.createUpload("memory", "big")
	parts := int32((size + memoryPartSize - 1) / memoryPartSize)
	completed := make([]s3types.CompletedPart, parts)
	next := make(chan int32)
	var wg sync.WaitGroup
	for range memoryWorkers {
		wg.Go(func() {
			buf := make([]byte, memoryPartSize)
			for n := range next {
				body := memoryPart(buf[:min(memoryPartSize, size-int64(n-1)*memoryPartSize)], n)
				out, err := c.c.UploadPart(c.ctx, &awss3.UploadPartInput{Bucket: aws.String("memory"), Key: aws.String("big"),
					UploadId: &id, PartNumber: aws.Int32(n), Body: bytes.NewReader(body)})
				if err != nil {
					t.Errorf("part %d: %v", n, err)
					continue
				}
				completed[n-1] = s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
			}
		})
	}
	for n := int32(1); n <= parts; n++ {
		next <- n
	}
	close(next)
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	done := must(c.complete("memory", "big", id, completed))
	eq(t, "ETag", aws.ToString(done.ETag), multipartETag(completed...))
	peak1, rss1 := procMemory(t, pid)

	// The object reads back as uploaded, part by part.
	out := must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("memory"), Key: aws.String("big")}))
	defer out.Body.Close()
	buf, got := make([]byte, memoryPartSize), make([]byte, memoryPartSize)
	for n := int32(1); n <= parts; n++ {
		want := memoryPart(buf[:min(memoryPartSize, size-int64(n-1)*memoryPartSize)], n)
		if _, err := io.ReadFull(out.Body, got[:len(want)]); err != nil || md5.Sum(got[:len(want)]) != md5.Sum(want) {
			t.Fatalf("part %d reads back wrong: %v", n, err)
		}
	}
	peak2, _ := procMemory(t, pid)

	t.Logf("server RSS %d MiB before; uploading %d MiB in %d parts of 16 MiB, %d at a time: peak RSS +%d MiB (RSS %d MiB after); reading it back: peak +%d MiB",
		rss0>>20, mib, parts, memoryWorkers, (peak1-peak0)>>20, rss1>>20, (peak2-peak0)>>20)
	if grew := peak2 - peak0; grew > memoryBound {
		t.Errorf("server peak RSS grew by %d MiB, over the bound of %d MiB", grew>>20, memoryBound>>20)
	}
}
