package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	stores "github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3"
)

// The memory figures check DESIGN.md's memory targets on the real
// binary: `stratafs serve --mount`, a child process on a data directory
// of its own under scratch, at its default settings but for the
// collector, off so that only the workload runs. Each workload runs on a
// server started for it, so that what an earlier one left in the heap
// neither hides nor adds to its growth, and so that a read goes through
// the server rather than the kernel's cache of what the previous workload
// wrote. The figure is how far the process's peak resident set (VmHWM,
// reset once the server is ready) rose above its resident set then.
// Beside it, the peak of its anonymous memory (RssAnon, sampled every few
// milliseconds): the resident set also counts the pages of the meta
// store's file that bbolt maps and a listing reads, which are the
// kernel's page cache, shared and taken back under pressure.

// memTarget is the most DESIGN.md lets the resident set grow by.
const memTarget = 64 << 20

const (
	memBucket   = "bench"
	memPartSize = 16 << 20
	memWorkers  = 4 // parts in flight, as the aws CLI and rclone send them
	memListPage = 1000
	memDir      = "big" // the directory of the listing figures' keys
)

// memoryFigures prints the memory figures; scratch holds the binary and
// the data directories.
func memoryFigures(w *tabwriter.Writer, scratch string) {
	if _, err := os.Stat("/dev/fuse"); err != nil {
		fmt.Fprintf(w, "memory\tskipped: /dev/fuse is missing (%v)\t\t\t\n", err)
		return
	}
	size, keys := int64(1<<30), 1_000_000
	if *quick {
		size, keys = 128<<20, 100_000
	}
	dir := filepath.Join(scratch, "memory")
	check(os.MkdirAll(dir, 0o755))
	bin := filepath.Join(dir, "stratafs")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/stratafs/stratafs/cmd/stratafs").CombinedOutput(); err != nil {
		check(fmt.Errorf("go build: %v\n%s", err, out))
	}
	h := memHarness{w: w, bin: bin, creds: s3.NewCredentials()}
	mib := size >> 20

	data := h.dataDir(filepath.Join(dir, "s3"), nil)
	h.measure(data, fmt.Sprintf("S3 multipart upload of %d MiB (%d MiB parts, %d in flight)", mib, memPartSize>>20, memWorkers),
		func(p *memServer) { p.upload(size) })
	h.measure(data, fmt.Sprintf("S3 GET of the %d MiB object", mib), func(p *memServer) { p.download(size) })
	check(os.RemoveAll(data))

	data = h.dataDir(filepath.Join(dir, "fuse"), nil)
	h.measure(data, fmt.Sprintf("FUSE write of %d MiB (1 MiB writes, fsync, close)", mib),
		func(p *memServer) { writeSeq(filepath.Join(p.mnt, "big"), size) })
	h.measure(data, fmt.Sprintf("FUSE read of the %d MiB file", mib), func(p *memServer) { readSeq(filepath.Join(p.mnt, "big"), size) })
	check(os.RemoveAll(data))

	data = h.dataDir(filepath.Join(dir, "list"), func(ctx context.Context, svc *object.Service) { loadFiles(ctx, svc, keys) })
	h.measure(data, fmt.Sprintf("ListObjectsV2 of %d keys, pages of %d", keys, memListPage), func(p *memServer) { p.list(keys) })
	h.measure(data, fmt.Sprintf("getdents of a directory of %d files", keys), func(p *memServer) { p.readdir(keys) })
	check(os.RemoveAll(data))
}

// A memHarness starts servers of one binary with one root key and prints
// their figures.
type memHarness struct {
	w     *tabwriter.Writer
	bin   string
	creds s3.Credentials
}

// dataDir makes a new data directory at path holding the versioned
// bucket the servers mount, and runs fill, if set, on it before any
// server opens it.
func (h memHarness) dataDir(path string, fill func(context.Context, *object.Service)) string {
	ctx := context.Background()
	check(os.RemoveAll(path)) // what a run on the same -dir left
	svc, closeAll, err := stores.Open(stores.Config{Dir: path}, object.Options{})
	check(err)
	_, err = svc.CreateBucket(ctx, memBucket, "")
	check(err)
	_, err = svc.SetVersioning(ctx, memBucket, meta.Enabled)
	check(err)
	if fill != nil {
		fill(ctx, svc)
	}
	check(closeAll())
	return path
}

// measure starts a server on data, runs the workload once it is ready and
// prints how far its memory grew.
func (h memHarness) measure(data, fig string, run func(*memServer)) {
	p := h.start(data)
	defer p.stop()
	before := p.resetPeak()
	peakAnon := p.sampleAnon()
	run(p)
	anon := peakAnon()
	after := p.status()
	fmt.Fprintf(h.w, "memory\t%s: RSS before\t%d\tMiB\t\n", fig, before.rss>>20)
	fmt.Fprintf(h.w, "memory\t%s: peak RSS growth (target ≤ %d MiB)\t%d\tMiB\t\n", fig, memTarget>>20, (after.hwm-before.rss)>>20)
	fmt.Fprintf(h.w, "memory\t%s: peak anonymous growth (sampled)\t%d\tMiB\t\n", fig, (anon-before.anon)>>20)
}

// A memServer is a running `stratafs serve --mount`, with a client of its
// S3 endpoint and its mount point.
type memServer struct {
	cmd *exec.Cmd
	c   *awss3.Client
	mnt string
}

var servingS3 = regexp.MustCompile(`serving S3 on (http://\S+) `)

// start starts the binary serving data on a free loopback port and
// mounting its bucket, and returns once the mount is up and one request
// went through each front end.
func (h memHarness) start(data string) *memServer {
	mnt := data + ".mnt"
	check(os.MkdirAll(mnt, 0o755))
	cmd := exec.Command(h.bin, "--data-dir", data, "serve", "--listen", "127.0.0.1:0", "--log-level", "warn",
		"--gc-interval", "0", "--mount", memBucket+":"+mnt)
	cmd.Env = append(os.Environ(), "STRATAFS_ACCESS_KEY="+h.creds.AccessKey, "STRATAFS_SECRET_KEY="+h.creds.SecretKey)
	cmd.Stderr = os.Stderr
	// check exits at once: the server then unmounts and stops too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	var printed []string
	endpoint := ""
	for sc := bufio.NewScanner(out); sc.Scan(); {
		printed = append(printed, sc.Text())
		if m := servingS3.FindStringSubmatch(sc.Text()); m != nil {
			endpoint = m[1]
		}
		if endpoint != "" && strings.HasPrefix(sc.Text(), "mounted bucket") {
			go io.Copy(io.Discard, out)
			p := &memServer{cmd: cmd, mnt: mnt, c: awss3.New(awss3.Options{
				Region:       "us-east-1",
				Credentials:  credentials.NewStaticCredentialsProvider(h.creds.AccessKey, h.creds.SecretKey, ""),
				BaseEndpoint: aws.String(endpoint),
				UsePathStyle: true,
				HTTPClient:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: memWorkers}},
			})}
			_, err := p.c.HeadBucket(context.Background(), &awss3.HeadBucketInput{Bucket: aws.String(memBucket)})
			check(err)
			_, err = os.Stat(filepath.Join(mnt, ".versions"))
			check(err)
			return p
		}
	}
	cmd.Process.Kill()
	cmd.Wait()
	check(fmt.Errorf("stratafs serve printed %q and stopped", printed))
	return nil
}

// stop stops the server as users do, which unmounts its bucket.
func (p *memServer) stop() {
	check(p.cmd.Process.Signal(syscall.SIGTERM))
	check(p.cmd.Wait())
}

// memStatus is what /proc/PID/status says of a process's memory, in bytes.
type memStatus struct{ rss, hwm, anon int64 }

func (p *memServer) status() memStatus {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	check(err)
	var s memStatus
	for line := range strings.Lines(string(b)) {
		name, value, _ := strings.Cut(line, ":")
		var field *int64
		switch name {
		case "VmRSS":
			field = &s.rss
		case "VmHWM":
			field = &s.hwm
		case "RssAnon":
			field = &s.anon
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		check(err)
		*field = kb << 10
	}
	if s.rss == 0 || s.hwm == 0 || s.anon == 0 {
		check(fmt.Errorf("/proc/%d/status has no VmRSS, VmHWM or RssAnon", p.cmd.Process.Pid))
	}
	return s
}

// resetPeak makes the peak resident set the current one (Linux's
// clear_refs "5") and returns the status then.
func (p *memServer) resetPeak() memStatus {
	check(os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", p.cmd.Process.Pid), []byte("5"), 0))
	return p.status()
}

// sampleAnon samples the process's anonymous memory until the function
// it returns is called, which returns the peak seen.
func (p *memServer) sampleAnon() func() int64 {
	done := make(chan struct{})
	var wg sync.WaitGroup
	peak := p.status().anon
	wg.Go(func() {
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, p.status().anon)
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return max(peak, p.status().anon)
	}
}

// memPart fills buf with part n's bytes, the same for every call with n.
func memPart(buf []byte, n int32) []byte {
	rand.NewChaCha8([32]byte{byte(n), byte(n >> 8)}).Read(buf)
	return buf
}

// upload uploads size bytes as object "big" in parts of memPartSize,
// memWorkers at a time.
func (p *memServer) upload(size int64) {
	ctx := context.Background()
	key := aws.String("big")
	up, err := p.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(memBucket), Key: key})
	check(err)
	parts := int32((size + memPartSize - 1) / memPartSize)
	done := make([]s3types.CompletedPart, parts)
	next := make(chan int32)
	var wg sync.WaitGroup
	for range memWorkers {
		wg.Go(func() {
			buf := make([]byte, memPartSize)
			for n := range next {
				body := memPart(buf[:min(memPartSize, size-int64(n-1)*memPartSize)], n)
				out, err := p.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(memBucket), Key: key,
					UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(body)})
				check(err)
				done[n-1] = s3types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.ETag}
			}
		})
	}
	for n := int32(1); n <= parts; n++ {
		next <- n
	}
	close(next)
	wg.Wait()
	_, err = p.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(memBucket), Key: key,
		UploadId: up.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: done}})
	check(err)
}

// download reads object "big" back and checks it part by part.
func (p *memServer) download(size int64) {
	out, err := p.c.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(memBucket), Key: aws.String("big")})
	check(err)
	defer out.Body.Close()
	want, got := make([]byte, memPartSize), make([]byte, memPartSize)
	for n := int32(1); int64(n-1)*memPartSize < size; n++ {
		w := memPart(want[:min(memPartSize, size-int64(n-1)*memPartSize)], n)
		_, err := io.ReadFull(out.Body, got[:len(w)])
		check(err)
		if !bytes.Equal(got[:len(w)], w) {
			check(fmt.Errorf("part %d of the object reads back wrong", n))
		}
	}
}

// loadFiles writes keys rows of 8 KiB files into memDir/ of the bucket,
// straight into the meta store, 1,000 per commit: each a copy of the row
// of one file put through the core, under its own name and version id.
// The files are larger than what the core stores inline in a row (4 KiB),
// as most files are: each row names a chunk (the same one), so the meta
// store holds what a listing reads, not the files' bytes.
func loadFiles(ctx context.Context, svc *object.Service, keys int) {
	block := make([]byte, 8<<10)
	v, err := svc.Put(ctx, memBucket, memKey(0), bytes.NewReader(block), object.PutOptions{Size: int64(len(block))})
	check(err)
	b, err := svc.Bucket(ctx, memBucket)
	check(err)
	ms := make([]meta.Mutation, 0, 1000)
	for i := 1; i < keys; i++ {
		c := *v
		c.Key, c.ID = memKey(i), meta.NewVersionID(time.Now())
		ms = append(ms, meta.PutMutation(b, &c))
		if len(ms) == cap(ms) || i == keys-1 {
			check(svc.Meta().Commit(ctx, b, ms...))
			ms = ms[:0]
		}
	}
}

func memKey(i int) string { return fmt.Sprintf("%s/f%07d", memDir, i) }

// list lists the bucket in pages of memListPage keys and checks it holds
// keys of them.
func (p *memServer) list(keys int) {
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(memBucket), MaxKeys: aws.Int32(memListPage)}
	n := 0
	for pages := awss3.NewListObjectsV2Paginator(p.c, in); pages.HasMorePages(); {
		page, err := pages.NextPage(context.Background())
		check(err)
		n += len(page.Contents)
	}
	if n != keys {
		check(fmt.Errorf("ListObjectsV2 found %d keys, want %d", n, keys))
	}
}

// readdir reads memDir's names through the mount without a stat, as
// getdents(2) returns them, and checks there are keys of them.
func (p *memServer) readdir(keys int) {
	f, err := os.Open(filepath.Join(p.mnt, memDir))
	check(err)
	defer f.Close()
	n := 0
	for {
		names, err := f.Readdirnames(memListPage)
		n += len(names)
		if err == io.EOF {
			break
		}
		check(err)
	}
	if n != keys {
		check(fmt.Errorf("getdents of %s found %d names, want %d", memDir, n, keys))
	}
}
