package integration

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the unprivileged user the tests mount as.
const nobody = 65534

// A userSetup is a directory every user may enter, holding the stratafs
// binary and, per test, data directories and mount points owned by
// nobody.
type userSetup struct {
	t    *testing.T
	base string
	bin  string
}

// newUserSetup prepares a test that acts as nobody: it must run as root,
// with fusermount3 installed (Debian's fuse3; .ci/run installs it).
func newUserSetup(t *testing.T) *userSetup {
	t.Helper()
	skipWithoutFUSE(t)
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING NON-ROOT MOUNT TEST: it runs as root to act as user nobody; CI runs it as root")
	}
	if _, err := exec.LookPath("fusermount3"); err != nil {
		t.Fatalf("fusermount3 is missing (Debian: apt install fuse3; .ci/run installs it): %v", err)
	}
	base, err := os.MkdirTemp("", "stratafs-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	u := &userSetup{t: t, base: base, bin: filepath.Join(base, "stratafs")}
	if out, err := exec.Command("go", "build", "-o", u.bin, "github.com/stratafs/stratafs/cmd/stratafs").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return u
}

// dir creates a directory named name owned by uid.
func (u *userSetup) dir(name string, uid int) string {
	u.t.Helper()
	d := filepath.Join(u.base, name)
	if err := os.Mkdir(d, 0o755); err != nil {
		u.t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil {
		u.t.Fatal(err)
	}
	return d
}

// command returns the command line args run as uid.
func (u *userSetup) command(uid int, args ...string) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = u.base
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + u.base, "STRATAFS_ACCESS_KEY=", "STRATAFS_SECRET_KEY="}
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	return cmd
}

// run runs args as uid; it must succeed. It returns the standard output.
func (u *userSetup) run(uid int, args ...string) string {
	u.t.Helper()
	out, err := u.command(uid, args...).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		u.t.Fatalf("%q as uid %d: %v: %s", args, uid, err, stderr)
	}
	return string(out)
}

// A userMount is `stratafs mount` running in the foreground.
type userMount struct {
	cmd *exec.Cmd
	dir string
}

// mount runs `stratafs mount` as uid until it says it mounted.
func (u *userSetup) mount(uid int, dataDir, bucket, dir string, flags ...string) *userMount {
	u.t.Helper()
	cmd := u.command(uid, append([]string{u.bin, "--data-dir", dataDir, "mount", bucket, dir}, flags...)...)
	// Unmounts before the process is killed: a failed test leaves no mount.
	runUntilMounted(u.t, cmd, "mounted bucket", func() { syscall.Unmount(dir, syscall.MNT_DETACH); cmd.Process.Kill(); cmd.Wait() })
	return &userMount{cmd: cmd, dir: dir}
}

// mountInfo returns the line of /proc/self/mountinfo for dir, "" if
// nothing is mounted there.
func mountInfo(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 4 && f[4] == dir {
			return l
		}
	}
	return ""
}

// stop sends SIGTERM and waits for a clean exit, with the mount gone.
func (m *userMount) stop(t *testing.T) {
	t.Helper()
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stratafs mount exited with %v after SIGTERM", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("stratafs mount still runs a minute after SIGTERM")
	}
	if l := mountInfo(t, m.dir); l != "" {
		t.Fatalf("still mounted after SIGTERM: %s", l)
	}
}

// TestFUSEAsUser mounts as user nobody, through fusermount3: files
// written there are that user's, keys without POSIX attributes get the
// mounting user as owner and the default umask, other users (root
// included) are kept out, and SIGTERM unmounts cleanly, committing what
// was written. allow_other needs user_allow_other in /etc/fuse.conf, and
// says so.
func TestFUSEAsUser(t *testing.T) {
	u := newUserSetup(t)
	usersOpenDevFUSE(t)
	data, mnt := u.dir("data", nobody), u.dir("mnt", nobody)
	u.run(nobody, u.bin, "--data-dir", data, "bucket", "create", "own")
	u.run(nobody, "sh", "-c", "printf 'from put' | "+u.bin+" --data-dir "+data+" put own/plain -")

	m := u.mount(nobody, data, "own", mnt)
	info := mountInfo(t, mnt)
	if !strings.Contains(info, " fuse.stratafs ") || !strings.Contains(info, "user_id=65534") {
		t.Fatalf("mountinfo: %q; want a fuse.stratafs mount of user 65534", info)
	}
	got := u.run(nobody, "sh", "-c", "cd mnt && printf hello > f && cat f && echo && stat -c '%n %u %g %a' f plain")
	if want := "hello\nf 65534 65534 644\nplain 65534 65534 644\n"; got != want {
		t.Errorf("as nobody in the mount:\n%s\nwant\n%s", got, want)
	}
	if _, err := os.Stat(filepath.Join(mnt, "f")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("root stats a file of nobody's mount made without allow_other: %v; want EACCES", err)
	}
	m.stop(t)
	if got := u.run(nobody, u.bin, "--data-dir", data, "get", "own/f", "-"); got != "hello" {
		t.Errorf("after the unmount the store has %q", got)
	}

	// allow_other as a user needs user_allow_other in /etc/fuse.conf.
	cmd := u.command(nobody, u.bin, "--data-dir", data, "mount", "--allow-other", "own", mnt)
	if userAllowsOther(t) {
		t.Log("/etc/fuse.conf has user_allow_other: allow_other as a user is checked in TestFUSEAllowOther's root case only")
		return
	}
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "user_allow_other") {
		t.Errorf("--allow-other as nobody without user_allow_other: %v, %q; want a failure that names it", err, out)
	}
	if l := mountInfo(t, mnt); l != "" {
		t.Errorf("mounted anyway: %s", l)
	}
}

// usersOpenDevFUSE makes /dev/fuse usable by every user, as Debian has
// it (systemd's udev rules make it 0666; fusermount3 opens it as the
// calling user). A container's /dev may have it 0600. It is left so.
func usersOpenDevFUSE(t *testing.T) {
	t.Helper()
	fi, err := os.Stat("/dev/fuse")
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o006 != 0o006 {
		t.Logf("/dev/fuse is %v; making it 0666, as on Debian", fi.Mode().Perm())
		if err := os.Chmod("/dev/fuse", 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

// userAllowsOther reports whether /etc/fuse.conf lets users mount with
// allow_other.
func userAllowsOther(t *testing.T) bool {
	b, err := os.ReadFile("/etc/fuse.conf")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) == "user_allow_other" {
			return true
		}
	}
	return false
}

// TestFUSEAllowOther mounts as root with --allow-other and --uid, --gid
// and --umask: other users get in, and the kernel checks their access
// against the files' modes and owners, the defaults given to keys that
// carry none among them.
func TestFUSEAllowOther(t *testing.T) {
	u := newUserSetup(t)
	data, mnt := u.dir("data", 0), u.dir("mnt", 0)
	u.run(0, u.bin, "--data-dir", data, "bucket", "create", "own")
	u.run(0, "sh", "-c", "printf 'from put' | "+u.bin+" --data-dir "+data+" put own/plain -")
	m := u.mount(0, data, "own", mnt, "--allow-other", "--uid", "1234", "--gid", "5678", "--umask", "026")
	// A key without POSIX attributes gets the owner and mode given, as
	// does the root, which has no marker: others may pass, not list.
	if fi, err := os.Stat(filepath.Join(mnt, "plain")); err != nil || fi.Mode() != 0o640 ||
		fi.Sys().(*syscall.Stat_t).Uid != 1234 || fi.Sys().(*syscall.Stat_t).Gid != 5678 {
		t.Fatalf("a key put with no POSIX attributes stats %v, %v; want -rw-r----- 1234:5678", fi, err)
	}
	for name, mode := range map[string]os.FileMode{"public": 0o644, "private": 0o600} {
		if err := os.WriteFile(filepath.Join(mnt, name), []byte(name), mode); err != nil {
			t.Fatal(err)
		}
	}
	try := func(script string) error {
		out, err := u.command(nobody, "sh", "-c", script).CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	if err := try("cat mnt/public"); err != nil {
		t.Errorf("nobody reads a 0644 file of root's mount: %v", err)
	}
	for _, script := range []string{"ls mnt", "cat mnt/private", "cat mnt/plain", "echo x >> mnt/public", "touch mnt/new"} {
		if err := try(script); err == nil || !strings.Contains(err.Error(), "Permission denied") {
			t.Errorf("nobody: %s: %v; want Permission denied", script, err)
		}
	}
	m.stop(t)
}
