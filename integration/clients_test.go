package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Real S3 clients from Debian's packages (.ci/run installs them) against
// the real `stratafs serve` on a loopback port: each takes a versioned
// bucket through its life as a person would from the shell, at the
// tool's default settings, and the SDK checks what it left behind. The
// tools are configured through the environment and files in a temporary
// directory, which is also their HOME: no configuration of the machine's
// user is read or written.

// clientBigFile is the size of the file each client uploads in parts.
const clientBigFile = 100 << 20

// clientFixture is the server and the files every client uses.
type clientFixture struct {
	dir      string // work files, tool configuration, the tools' HOME
	endpoint string
	creds    aws.Credentials
	sdk      s3Test
	// small1 and small2 are two versions of a small file; big is
	// clientBigFile bytes, larger than every client's multipart threshold.
	small1, small2, big string
}

func TestClients(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and moves 100 MiB through each client")
	}
	dir := t.TempDir()
	p := startServe(t, buildStratafs(t), filepath.Join(dir, "data"))
	f := &clientFixture{dir: dir, endpoint: p.endpoint, creds: exported(t, strings.Join(p.stdout, "\n"))}
	srv := &s3Server{url: p.endpoint, tr: &http.Transport{}}
	f.sdk = s3Test{t: t, ctx: context.Background(), c: srv.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.StaticCredentialsProvider{Value: f.creds}
	})}
	f.small1 = writeRandomFile(t, filepath.Join(dir, "small1"), 100, 1)
	f.small2 = writeRandomFile(t, filepath.Join(dir, "small2"), 3000, 2)
	f.big = writeRandomFile(t, filepath.Join(dir, "big"), clientBigFile, 3)
	for _, d := range []string{"home", "out"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	// The clients use buckets of their own, side by side.
	for name, run := range map[string]func(*testing.T){"aws": f.awsCLI, "s3cmd": f.s3cmd, "rclone": f.rclone} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			run(t)
		})
	}
}

// writeRandomFile writes n seeded random bytes to path.
func writeRandomFile(t *testing.T, path string, n int64, seed byte) string {
	t.Helper()
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(out, rand.NewChaCha8([32]byte{seed}), n); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// A clientTool runs one client program with its configuration.
type clientTool struct {
	t    *testing.T
	path string
	env  []string
	args []string // before every command's own
}

// tool finds a client program, preferring the Debian package's in
// /usr/bin over others on PATH, and skips the test, loudly, without
// one. Its environment is the test's without any AWS_ or RCLONE_
// variable of the machine's, plus env.
func (f *clientFixture) tool(t *testing.T, name, pkg string, env []string, args ...string) clientTool {
	t.Helper()
	path := "/usr/bin/" + name
	if _, err := os.Stat(path); err != nil {
		if path, err = exec.LookPath(name); err != nil {
			t.Skipf("SKIPPED: %s is not installed (Debian package %s; .ci/run installs it)", name, pkg)
		}
	}
	var clean []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "RCLONE_") && !strings.HasPrefix(kv, "HOME=") {
			clean = append(clean, kv)
		}
	}
	clean = append(clean, "HOME="+filepath.Join(f.dir, "home"))
	return clientTool{t: t, path: path, env: append(clean, env...), args: args}
}

// run runs a command that must succeed and returns its standard output.
func (c clientTool) run(args ...string) string {
	c.t.Helper()
	cmd := exec.Command(c.path, append(append([]string{}, c.args...), args...)...)
	cmd.Env = c.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		c.t.Fatalf("%s %s: %v\n%s%s", filepath.Base(c.path), strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// clientOps are one client's commands for the steps of the scenario.
type clientOps struct {
	createBucket, enableVersioning func(bucket string)
	put                            func(file, bucket, key string)
	list                           func(bucket string) string
	get                            func(bucket, key, file string)
	remove                         func(bucket, key string)
	// removeAll removes every version and delete marker, then the bucket.
	removeAll func(bucket string)
}

// scenario takes a bucket through its life with one client: created,
// versioned, two versions of a small file and a big file uploaded in
// parts, listed, read back byte for byte, the small file deleted (a
// delete marker), and everything removed.
func (f *clientFixture) scenario(t *testing.T, bucket string, ops clientOps) {
	c := f.sdk
	c.t = t
	defer recoverMust(t)
	ops.createBucket(bucket)
	ops.enableVersioning(bucket)
	eq(t, "versioning", must(c.c.GetBucketVersioning(c.ctx, &awss3.GetBucketVersioningInput{Bucket: &bucket})).Status,
		s3types.BucketVersioningStatusEnabled)
	ops.put(f.small1, bucket, "small.txt")
	ops.put(f.small2, bucket, "small.txt")
	ops.put(f.big, bucket, "dir/big.bin")

	ls := ops.list(bucket)
	if !strings.Contains(ls, "small.txt") || !strings.Contains(ls, "big.bin") {
		t.Fatalf("listing lacks the files:\n%s", ls)
	}
	got := filepath.Join(f.dir, "out", bucket+"-big.bin")
	ops.get(bucket, "dir/big.bin", got)
	if fileSHA256(t, got) != fileSHA256(t, f.big) {
		t.Fatal("the big file read back differs from the file put")
	}
	small, err := os.ReadFile(f.small2)
	noErr(t, err)
	if _, latest := c.get(bucket, "small.txt", ""); !bytes.Equal(latest, small) {
		t.Fatal("small.txt is not its second version")
	}
	head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: aws.String("dir/big.bin")}))
	if !strings.Contains(aws.ToString(head.ETag), "-") || aws.ToInt64(head.ContentLength) != clientBigFile {
		t.Fatalf("big file: ETag %s, %d bytes; want a multipart upload of %d", aws.ToString(head.ETag), aws.ToInt64(head.ContentLength), clientBigFile)
	}

	ops.remove(bucket, "small.txt")
	rows := c.versions(bucket, 1000)
	if len(rows) != 4 || !strings.HasSuffix(rows[0], "*") || !strings.HasSuffix(rows[1], ":marker*") {
		t.Fatalf("versions after delete: %v; want big.bin, then small.txt's marker and two versions", rows)
	}
	ops.removeAll(bucket)
	_, err = c.c.HeadBucket(c.ctx, &awss3.HeadBucketInput{Bucket: &bucket})
	eq(t, "HeadBucket after removal", errOf(t, err).status, 404)
}

// removeVersions deletes every version and marker with the SDK, for
// clients that have no command for it.
func (f *clientFixture) removeVersions(t *testing.T, bucket string) {
	c := f.sdk
	c.t = t
	for _, row := range c.versions(bucket, 1000) {
		key, id, _ := strings.Cut(strings.TrimSuffix(strings.TrimSuffix(row, "*"), ":marker"), "@")
		c.del(bucket, key, id)
	}
}

func (f *clientFixture) awsCLI(t *testing.T) {
	empty := filepath.Join(f.dir, "aws-empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cli := f.tool(t, "aws", "awscli", []string{"AWS_ACCESS_KEY_ID=" + f.creds.AccessKeyID, "AWS_SECRET_ACCESS_KEY=" + f.creds.SecretAccessKey,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=" + empty, "AWS_SHARED_CREDENTIALS_FILE=" + empty,
		"AWS_PAGER=", "AWS_EC2_METADATA_DISABLED=true"}, "--endpoint-url", f.endpoint)
	s3url := func(bucket, key string) string { return "s3://" + bucket + "/" + key }
	f.scenario(t, "aws-cli", clientOps{
		createBucket: func(b string) { cli.run("s3", "mb", s3url(b, "")) },
		enableVersioning: func(b string) {
			cli.run("s3api", "put-bucket-versioning", "--bucket", b, "--versioning-configuration", "Status=Enabled")
		},
		put:    func(file, b, key string) { cli.run("s3", "cp", "--only-show-errors", file, s3url(b, key)) },
		list:   func(b string) string { return cli.run("s3", "ls", "--recursive", s3url(b, "")) },
		get:    func(b, key, file string) { cli.run("s3", "cp", "--only-show-errors", s3url(b, key), file) },
		remove: func(b, key string) { cli.run("s3", "rm", "--only-show-errors", s3url(b, key)) },
		removeAll: func(b string) {
			type version struct{ Key, VersionId string }
			var page struct{ Versions, DeleteMarkers []version }
			out := cli.run("s3api", "list-object-versions", "--bucket", b, "--output", "json")
			if err := json.Unmarshal([]byte(out), &page); err != nil {
				t.Fatalf("list-object-versions: %v\n%s", err, out)
			}
			if len(page.Versions) != 3 || len(page.DeleteMarkers) != 1 || page.DeleteMarkers[0].Key != "small.txt" {
				t.Fatalf("list-object-versions: %d versions, markers %v; want 3 and small.txt's", len(page.Versions), page.DeleteMarkers)
			}
			del, err := json.Marshal(struct{ Objects []version }{append(page.Versions, page.DeleteMarkers...)})
			noErr(t, err)
			cli.run("s3api", "delete-objects", "--bucket", b, "--delete", string(del))
			cli.run("s3", "rb", s3url(b, ""))
		},
	})
}

func (f *clientFixture) s3cmd(t *testing.T) {
	host := strings.TrimPrefix(f.endpoint, "http://")
	cfg := filepath.Join(f.dir, "s3cfg")
	conf := fmt.Sprintf("[default]\naccess_key = %s\nsecret_key = %s\nhost_base = %s\nhost_bucket = %s\nuse_https = False\nbucket_location = us-east-1\n",
		f.creds.AccessKeyID, f.creds.SecretAccessKey, host, host)
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	s3cmd := f.tool(t, "s3cmd", "s3cmd", nil, "-c", cfg, "--no-progress")
	s3url := func(bucket, key string) string { return "s3://" + bucket + "/" + key }
	f.scenario(t, "s3cmd", clientOps{
		createBucket: func(b string) { s3cmd.run("mb", s3url(b, "")) },
		// s3cmd has no command for versioning: the SDK stands in.
		enableVersioning: func(b string) { f.sdk.versioning(b, s3types.BucketVersioningStatusEnabled) },
		put:              func(file, b, key string) { s3cmd.run("put", file, s3url(b, key)) },
		list:             func(b string) string { return s3cmd.run("ls", "--recursive", s3url(b, "")) },
		get:              func(b, key, file string) { s3cmd.run("get", "--force", s3url(b, key), file) },
		remove:           func(b, key string) { s3cmd.run("del", s3url(b, key)) },
		removeAll: func(b string) {
			f.removeVersions(t, b)
			s3cmd.run("rb", s3url(b, ""))
		},
	})
}

func (f *clientFixture) rclone(t *testing.T) {
	cfg := filepath.Join(f.dir, "rclone.conf")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// The remote "strata" lives in the environment. rclone uploads in
	// parts only above 200 MiB by default; a lower cutoff makes the big
	// file go in its default 5 MiB parts.
	rclone := f.tool(t, "rclone", "rclone", []string{"RCLONE_CONFIG=" + cfg,
		"RCLONE_CONFIG_STRATA_TYPE=s3", "RCLONE_CONFIG_STRATA_PROVIDER=Other", "RCLONE_CONFIG_STRATA_ENDPOINT=" + f.endpoint,
		"RCLONE_CONFIG_STRATA_ACCESS_KEY_ID=" + f.creds.AccessKeyID, "RCLONE_CONFIG_STRATA_SECRET_ACCESS_KEY=" + f.creds.SecretAccessKey,
		"RCLONE_CONFIG_STRATA_REGION=us-east-1", "RCLONE_CONFIG_STRATA_UPLOAD_CUTOFF=64M"})
	remote := func(bucket, key string) string { return "strata:" + bucket + "/" + key }
	f.scenario(t, "rclone", clientOps{
		createBucket:     func(b string) { rclone.run("mkdir", remote(b, "")) },
		enableVersioning: func(b string) { rclone.run("backend", "versioning", remote(b, ""), "Enabled") },
		put:              func(file, b, key string) { rclone.run("copyto", file, remote(b, key)) },
		list:             func(b string) string { return rclone.run("lsf", "--recursive", remote(b, "")) },
		get:              func(b, key, file string) { rclone.run("copyto", remote(b, key), file) },
		remove:           func(b, key string) { rclone.run("deletefile", remote(b, key)) },
		// cleanup-hidden removes the old versions and delete markers,
		// purge the rest and the bucket.
		removeAll: func(b string) {
			rclone.run("backend", "cleanup-hidden", remote(b, ""))
			rclone.run("purge", remote(b, ""))
		},
	})
}
