package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stratafs/stratafs/backend"
	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// crashWriterEnv names the data directory when this test binary runs as
// the writer that TestCrashSafety kills.
const crashWriterEnv = "STRATAFS_CRASH_WRITER_DIR"

const crashChunk = 32 << 10

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashWriterEnv); dir != "" {
		if err := crashWriter(dir); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openStore(dir string) (*object.Service, func() error, error) {
	return backend.Open(backend.Config{Dir: dir}, object.Options{ChunkSize: crashChunk})
}

// crashWriter puts objects until it is killed, printing one line per
// acknowledged version: key, version id, hex MD5 of the body. Several
// writers run at once so group commits are in flight when the kill lands.
func crashWriter(dir string) error {
	svc, closeAll, err := openStore(dir)
	if err != nil {
		return err
	}
	defer closeAll()
	ctx := context.Background()
	if _, err := svc.CreateBucket(ctx, "crash", ""); err != nil && !errors.Is(err, meta.ErrBucketExists) {
		return err
	}
	if _, err := svc.SetVersioning(ctx, "crash", meta.Enabled); err != nil {
		return err
	}
	acks := make(chan string)
	for w := 0; w < 4; w++ {
		go func() {
			for i := 0; ; i++ {
				key := fmt.Sprintf("k%d", rand.IntN(50))
				body := make([]byte, []int{10, 5000, crashChunk + 7, 3*crashChunk + 1}[rand.IntN(4)])
				for j := range body {
					body[j] = byte(rand.Uint32())
				}
				v, err := svc.Put(ctx, "crash", key, bytes.NewReader(body), object.PutOptions{Size: int64(len(body))})
				if err != nil {
					fmt.Fprintln(os.Stderr, "put:", err)
					os.Exit(1)
				}
				acks <- fmt.Sprintf("%s %s %x", key, v.WireID(), md5.Sum(body))
			}
		}()
	}
	out := bufio.NewWriter(os.Stdout)
	for line := range acks {
		fmt.Fprintln(out, line)
		out.Flush()
	}
	return nil
}

// TestCrashSafety kills writers with SIGKILL at random moments, then checks
// that every acknowledged version reads back byte for byte and that no row
// names a missing chunk.
func TestCrashSafety(t *testing.T) {
	dir := t.TempDir()
	acked := map[string]string{} // "key version" → md5
	for round := 0; round < 6; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashWriterEnv+"="+dir)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		// The kill lands at a random moment after the first acknowledgement,
		// so that a writer slow to start (a loaded machine, the race
		// detector) is still killed mid-stream rather than before it wrote.
		kill := time.After(time.Minute) // a writer that never acknowledges
		armed := false
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				f := strings.Fields(l)
				acked[f[0]+" "+f[1]] = f[2]
				if !armed {
					kill, armed = time.After(time.Duration(rand.IntN(400))*time.Millisecond), true
				}
			case <-kill:
				cmd.Process.Signal(syscall.SIGKILL)
				kill = nil
			}
		}
		err = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("round %d: writer exited on its own (%v): %s", round, err, stderr.String())
		}
	}
	if len(acked) == 0 {
		t.Fatal("no version was acknowledged before the kills")
	}

	svc, closeAll, err := openStore(dir)
	if err != nil {
		t.Fatalf("reopen after crashes: %v", err)
	}
	defer closeAll()
	ctx := context.Background()
	for kv, sum := range acked {
		key, id, _ := strings.Cut(kv, " ")
		obj, err := svc.Get(ctx, "crash", key, id, 0, -1)
		if err != nil {
			t.Fatalf("acknowledged %s?versionId=%s lost: %v", key, id, err)
		}
		h := md5.New()
		_, err = io.Copy(h, obj.Body)
		obj.Body.Close()
		if err != nil || fmt.Sprintf("%x", h.Sum(nil)) != sum {
			t.Fatalf("acknowledged %s?versionId=%s reads back wrong: %v", key, id, err)
		}
	}
	rows := checkEveryRowReadable(t, svc, "crash")
	t.Logf("%d acknowledged versions survived; %d rows, all chunks present", len(acked), rows)
}

// checkEveryRowReadable reads every version in the bucket to the end, so a
// row naming a missing chunk fails the test.
func checkEveryRowReadable(t *testing.T, svc *object.Service, bucket string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	o := meta.VersionListOptions{}
	for {
		page, err := svc.ListVersions(ctx, bucket, o)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range page.Versions {
			n++
			if v.DeleteMarker {
				continue
			}
			body, _, err := svc.Open(ctx, v.Version, 0, -1)
			if err == nil {
				_, err = io.Copy(io.Discard, body)
				body.Close()
			}
			if err != nil {
				t.Fatalf("row %s?versionId=%s: %v (missing chunk: %v)", v.Key, v.WireID(), err, errors.Is(err, data.ErrNoSuchChunk))
			}
		}
		if !page.IsTruncated {
			return n
		}
		o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}
