package integration

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sys/unix"

	"github.com/stratafs/stratafs/fs"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// TestFUSECrossPath drives one `stratafs serve --mount` process through
// the AWS SDK and through its mount, and checks that each path shows what
// the other did: the mount's writes over S3, and S3's writes, deletes,
// undeletes, copies and multipart uploads in the mount at once, the
// kernel's caches notwithstanding (every check right after an S3 response
// follows a look at the same name that filled them).
func TestFUSECrossPath(t *testing.T) {
	m := startServeMount(t, "cross")
	defer recoverMust(t)
	t.Run("MountToS3", func(t *testing.T) { defer recoverMust(t); m.on(t).mountToS3() })
	t.Run("S3ToMount", func(t *testing.T) { defer recoverMust(t); m.on(t).s3ToMount() })
	t.Run("Versions", func(t *testing.T) { defer recoverMust(t); m.on(t).versionsParity() })
	t.Run("UnnamableKeys", func(t *testing.T) { defer recoverMust(t); m.on(t).unnamableKeys() })
}

// on returns m with t as the test its helpers report to.
func (m *servedMount) on(t *testing.T) *servedMount {
	c := m.c
	c.t = t
	return &servedMount{servedProcess: m.servedProcess, dir: m.dir, c: c}
}

const crossBucket = "cross"

func (m *servedMount) path(name string) string { return filepath.Join(m.dir, name) }

// read reads a file of the mount; it must exist.
func (m *servedMount) read(name string) []byte {
	m.c.t.Helper()
	b, err := os.ReadFile(m.path(name))
	if err != nil {
		m.c.t.Fatalf("read %s in the mount: %v", name, err)
	}
	return b
}

// stat stats a file of the mount; it must exist.
func (m *servedMount) stat(name string) os.FileInfo {
	m.c.t.Helper()
	fi, err := os.Stat(m.path(name))
	if err != nil {
		m.c.t.Fatalf("stat %s in the mount: %v", name, err)
	}
	return fi
}

// absent checks that the mount has no name.
func (m *servedMount) absent(what, name string) {
	m.c.t.Helper()
	if _, err := os.Lstat(m.path(name)); !errors.Is(err, os.ErrNotExist) {
		m.c.t.Fatalf("%s: the mount stats %s: %v", what, name, err)
	}
}

// names lists a directory of the mount in readdir order.
func (m *servedMount) names(name string) []string {
	m.c.t.Helper()
	ents, err := os.ReadDir(m.path(name)) // sorted: readdir order is checked apart
	if err != nil {
		m.c.t.Fatalf("list %s in the mount: %v", name, err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// mountToS3 writes in the mount and reads over S3: bytes, size, user
// xattrs as x-amz-meta-*, and the POSIX attributes CopyObject carries.
func (m *servedMount) mountToS3() {
	t, c := m.c.t, m.c
	body := randomBytes(300<<10, 1)
	if err := os.Mkdir(m.path("m"), 0o750); err != nil {
		t.Fatal(err)
	}
	name := "m/a.txt"
	if err := os.WriteFile(m.path(name), body, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(m.path(name), "user.color", []byte("blue"), 0); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	if err := os.Chtimes(m.path(name), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	fsyncPath(t, m.path(name)) // committed: every reader of the store sees it

	head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String(crossBucket), Key: aws.String(name), ChecksumMode: s3types.ChecksumModeEnabled}))
	eq(t, "S3 size of the mount's file", aws.ToInt64(head.ContentLength), int64(len(body)))
	eq(t, "S3 CRC32C of the mount's file", aws.ToString(head.ChecksumCRC32C), crc32cb64(body))
	eq(t, "S3 checksum type of the mount's file", head.ChecksumType, s3types.ChecksumTypeFullObject)
	if etag := aws.ToString(head.ETag); !strings.HasSuffix(etag, `-0"`) {
		t.Errorf("S3 ETag of the mount's file: %s, want an opaque one", etag)
	}
	eq(t, "x-amz-meta-color of user.color", head.Metadata["color"], "blue")
	_, got := c.get(crossBucket, name, "")
	if !bytes.Equal(got, body) {
		t.Errorf("S3 reads %d bytes of the mount's %d, not the same", len(got), len(body))
	}
	// The version S3 serves is the newest one .versions names by its time.
	// The write, the xattr and the times make one to three versions: the
	// journal folds changes into a commit still queued, but under load the
	// write's commit may land before the others arrive.
	vs := m.names(".versions/" + name)
	if len(vs) < 1 || len(vs) > 3 || !strings.HasPrefix(vs[len(vs)-1], head.LastModified.UTC().Format("2006-01-02T15:04:05.")) {
		t.Errorf(".versions/%s lists %q; want 1 to 3 versions, the last of S3's Last-Modified %v", name, vs, head.LastModified)
	}

	// x-amz-meta-* set over S3 is a user xattr in the mount; CopyObject
	// keeps the POSIX attributes set in the mount.
	must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{
		Bucket: aws.String(crossBucket), Key: aws.String("m/copy.txt"), CopySource: aws.String(crossBucket + "/" + name),
		MetadataDirective: s3types.MetadataDirectiveReplace, Metadata: map[string]string{"shape": "round"},
	}))
	fi := m.stat("m/copy.txt")
	if fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(mtime) || fi.Size() != int64(len(body)) {
		t.Errorf("the S3 copy stats %v %v %d; want the mount's 0640, %v, %d", fi.Mode(), fi.ModTime(), fi.Size(), mtime, len(body))
	}
	buf := make([]byte, 16)
	n, err := unix.Getxattr(m.path("m/copy.txt"), "user.shape", buf)
	if err != nil || string(buf[:n]) != "round" {
		t.Errorf("user.shape of x-amz-meta-shape: %q, %v", buf[:n], err)
	}
	if _, err := unix.Getxattr(m.path("m/copy.txt"), "user.color", buf); !errors.Is(err, unix.ENODATA) {
		t.Errorf("user.color after a copy that replaced the metadata: %v", err)
	}
}

// s3ToMount changes keys over S3 and looks at them in the mount right
// after each response: no retry, no sleep.
func (m *servedMount) s3ToMount() {
	t, c := m.c.t, m.c
	one, two := randomBytes(8<<10, 2), randomBytes(8<<10, 3) // same size: only the bytes tell them apart
	c.put(crossBucket, "s/x", one)
	if !bytes.Equal(m.read("s/x"), one) { // its pages are cached now
		t.Fatal("the mount does not read the S3 PUT")
	}
	m.absent("before the copy", "s/y") // a cached negative entry
	m.absent("before the upload", "s/big")
	held, err := os.Open(m.path("s/x"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	c.put(crossBucket, "s/x", two)
	if !bytes.Equal(m.read("s/x"), two) {
		t.Error("after an S3 overwrite of the same size the mount reads the old bytes")
	}
	if got, err := io.ReadAll(held); err != nil || !bytes.Equal(got, one) {
		t.Errorf("a handle opened before the overwrite reads %d bytes (%v), not its version", len(got), err)
	}
	head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String(crossBucket), Key: aws.String("s/x")}))
	if fi := m.stat("s/x"); !fi.ModTime().Truncate(time.Second).Equal(*head.LastModified) {
		t.Errorf("the mount's mtime of an S3 object is %v, its Last-Modified %v", fi.ModTime(), head.LastModified)
	}

	marker := c.del(crossBucket, "s/x", "")
	m.absent("after an S3 DELETE", "s/x")
	if slices.Contains(m.names("s"), "x") {
		t.Error("the mount lists s/x after an S3 DELETE")
	}
	c.del(crossBucket, "s/x", aws.ToString(marker.VersionId)) // undelete
	if got, err := os.ReadFile(m.path("s/x")); err != nil || !bytes.Equal(got, two) {
		t.Errorf("after deleting the delete marker the mount reads %d bytes, %v; want the version under it", len(got), err)
	}

	must(c.c.CopyObject(c.ctx, &awss3.CopyObjectInput{
		Bucket: aws.String(crossBucket), Key: aws.String("s/y"), CopySource: aws.String(crossBucket + "/s/x"),
	}))
	if got, err := os.ReadFile(m.path("s/y")); err != nil || !bytes.Equal(got, two) {
		t.Errorf("after an S3 CopyObject the mount reads %d bytes, %v", len(got), err)
	}

	big := randomBytes(5<<20+1000, 4)
	id := c.createUpload(crossBucket, "s/big")
	parts := []s3types.CompletedPart{c.part(crossBucket, "s/big", id, 1, big[:5<<20]), c.part(crossBucket, "s/big", id, 2, big[5<<20:])}
	must(c.complete(crossBucket, "s/big", id, parts))
	if fi, err := os.Stat(m.path("s/big")); err != nil || fi.Size() != int64(len(big)) {
		t.Fatalf("after a multipart upload the mount stats %v, %v", fi, err)
	}
	if !bytes.Equal(m.read("s/big"), big) {
		t.Error("the mount reads other bytes than the multipart upload's")
	}
	eq(t, "the mount lists what ListObjectsV2 lists", strings.Join(m.names("s"), " "), strings.Join(m.s3Names("s/"), " "))
}

// s3Names returns the names ListObjectsV2 shows under prefix with
// delimiter "/": keys and common prefixes, less the prefix, sorted.
func (m *servedMount) s3Names(prefix string) []string {
	c := m.c
	var names []string
	p := awss3.NewListObjectsV2Paginator(c.c, &awss3.ListObjectsV2Input{Bucket: aws.String(crossBucket), Prefix: &prefix, Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page := must(p.NextPage(c.ctx))
		for _, o := range page.Contents {
			names = append(names, strings.TrimPrefix(*o.Key, prefix))
		}
		for _, cp := range page.CommonPrefixes {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(*cp.Prefix, prefix), "/"))
		}
	}
	slices.Sort(names)
	return names
}

// versionsParity checks that .versions/<key> lists, in readdir order,
// exactly the rows ListObjectVersions lists for the key, in its order,
// several of them in one second; and that .versions/<dir> lists every
// name that ever existed under dir.
func (m *servedMount) versionsParity() {
	t, c := m.c.t, m.c
	key := "v/k"
	bodies := map[string][]byte{}
	put := func(b []byte) {
		out := c.put(crossBucket, key, b)
		bodies[aws.ToString(out.VersionId)] = b
	}
	for i := range 6 { // quick: several share a second
		put([]byte(strings.Repeat("v", i+1)))
	}
	c.del(crossBucket, key, "")
	put([]byte("after the marker"))
	if err := os.WriteFile(m.path(key), []byte("from the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	fsyncPath(t, m.path(key))

	rows := slices.DeleteFunc(m.s3Rows(key), func(r s3Row) bool { return r.key != key })
	var want []string
	seconds := map[int64]bool{}
	for _, r := range rows {
		id, err := meta.ParseVersionID(r.id)
		if err != nil {
			t.Fatalf("version id %q: %v", r.id, err)
		}
		name := id.Time().UTC().Format("2006-01-02T15:04:05.000000000Z")
		if r.marker {
			name += ".deleted"
		}
		want = append(want, name)
		seconds[id.Time().Unix()] = true
	}
	if len(seconds) == len(want) {
		t.Logf("no two of the %d versions fell in one second: the case is not exercised this run", len(want))
	}
	d, err := os.Open(m.path(".versions/" + key))
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf(".versions/%s lists\n%q\nListObjectVersions\n%q", key, got, want)
	}
	for i, r := range rows {
		if b, ok := bodies[r.id]; ok && !bytes.Equal(m.read(".versions/"+key+"/"+want[i]), b) {
			t.Errorf("version %s (%s) reads other bytes than S3's", r.id, want[i])
		}
	}

	// Names gone from the tree are still there: unlinked in the mount,
	// deleted over S3, a directory whose only key was deleted.
	if err := os.WriteFile(m.path("v/gone"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(m.path("v/gone")); err != nil {
		t.Fatal(err)
	}
	c.put(crossBucket, "v/sub/deep", []byte("x"))
	c.del(crossBucket, "v/sub/deep", "")
	c.put(crossBucket, "v/s3gone", []byte("x"))
	c.del(crossBucket, "v/s3gone", "")
	m.absent("a deleted directory", "v/sub")
	fsyncPath(t, m.dir)
	var ever []string
	for _, r := range m.s3Rows("v/") {
		name, _, _ := strings.Cut(strings.TrimPrefix(r.key, "v/"), "/")
		if len(ever) == 0 || ever[len(ever)-1] != name {
			ever = append(ever, name)
		}
	}
	eq(t, ".versions/v lists every name ListObjectVersions has under v/", strings.Join(m.names(".versions/v"), " "), strings.Join(ever, " "))
	eq(t, "the names ever under v/", strings.Join(ever, " "), "gone k s3gone sub")
	eq(t, "the live names under v/", strings.Join(m.names("v"), " "), "k")
}

// unnamableKeys puts over S3 keys whose components cannot be file names
// (empty, "." or "..", longer than NAME_MAX): the mount's listings skip
// them, the rest of the directory lists, and S3 still serves them.
func (m *servedMount) unnamableKeys() {
	t, c := m.c.t, m.c
	long := strings.Repeat("x", 256)
	bad := []string{"n//empty", "n/./dot", "n/../dotdot", "n/" + long, "n/" + long + "/deep", "n/d/.", "/lead"}
	for _, k := range append(bad, "n/ok", "n/d/fine") {
		c.put(crossBucket, k, []byte(k))
	}
	eq(t, "the mount lists n/", strings.Join(m.names("n"), " "), "d ok")
	eq(t, "the mount lists n/d/", strings.Join(m.names("n/d"), " "), "fine")
	eq(t, ".versions lists n/", strings.Join(m.names(".versions/n"), " "), "d ok")
	if slices.Contains(m.names(""), "") {
		t.Error("the root lists an empty name")
	}
	for _, k := range bad {
		if _, body := c.get(crossBucket, k, ""); string(body) != k {
			t.Errorf("S3 reads %q for %q", body, k)
		}
	}
}

// An s3Row is one row of ListObjectVersions.
type s3Row struct {
	key, id string
	marker  bool
}

// s3Rows lists the rows under prefix in the store's order, which the SDK
// splits into versions and delete markers: by key, then by version id
// (ids sort newest first, DESIGN.md).
func (m *servedMount) s3Rows(prefix string) []s3Row {
	c := m.c
	var rows []s3Row
	p := awss3.NewListObjectVersionsPaginator(c.c, &awss3.ListObjectVersionsInput{Bucket: aws.String(crossBucket), Prefix: &prefix})
	for p.HasMorePages() {
		page := must(p.NextPage(c.ctx))
		for _, v := range page.Versions {
			rows = append(rows, s3Row{key: *v.Key, id: *v.VersionId})
		}
		for _, d := range page.DeleteMarkers {
			rows = append(rows, s3Row{key: *d.Key, id: *d.VersionId, marker: true})
		}
	}
	slices.SortFunc(rows, func(a, b s3Row) int {
		return strings.Compare(a.key+"\x00"+a.id, b.key+"\x00"+b.id)
	})
	return rows
}

// fsyncPath fsyncs a file or directory of the mount: what was changed
// there before is committed when it returns.
func fsyncPath(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync %s: %v", path, err)
	}
}

// TestFUSEOtherProcessesWithinTimeouts changes a mounted bucket through
// a second core over the same stores, as another process would (a
// gateway sharing the meta store): nothing tells the mount, yet once the
// entry and attribute timeouts have passed it shows the changes — new
// bytes of the same size, a new key, a delete, an undelete.
func TestFUSEOtherProcessesWithinTimeouts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	f := newFUSEMount(t, fs.Options{EntryTimeout: timeout, AttrTimeout: timeout})
	other := object.New(f.svc.Meta(), f.svc.Data(), object.Options{ChunkSize: fuseChunk})
	put := func(key string, b []byte) {
		if _, err := other.Put(f.ctx, "bkt", key, bytes.NewReader(b), object.PutOptions{Size: int64(len(b))}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(key, version string) string {
		res, err := other.Delete(f.ctx, "bkt", key, object.DeleteOptions{VersionID: version})
		if err != nil {
			t.Fatal(err)
		}
		return res.VersionID
	}
	one, two := fuseRandom(2*fuseChunk), fuseRandom(2*fuseChunk)
	put("k", one)
	put("gone", []byte("x"))
	if !bytes.Equal(f.read("k"), one) || string(f.read("gone")) != "x" {
		t.Fatal("the mount does not read the first versions")
	}
	if _, err := os.Stat(f.path("new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	put("k", two)
	put("new", []byte("new"))
	marker := del("gone", "")
	fuseEventually(t, "another process's changes within the timeouts", func() error {
		switch b, err := os.ReadFile(f.path("k")); {
		case err != nil:
			return err
		case !bytes.Equal(b, two):
			return errors.New("k reads other bytes than its new version's")
		}
		if _, err := os.Stat(f.path("new")); err != nil {
			return err
		}
		if _, err := os.Stat(f.path("gone")); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("gone: %v", err)
		}
		return nil
	})
	del("gone", marker)
	fuseEventually(t, "another process's undelete within the timeouts", func() error {
		_, err := os.Stat(f.path("gone"))
		return err
	})
}
