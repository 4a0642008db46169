// Package timetest helps tests that move time: a fake clock for the core
// (object.Options.Now), and a process of their own to run in. A process
// never issues a version id older than one it issued before (meta's id
// clock runs forward only), so a fake clock must start after every id
// issued so far, and once it has run ahead of the real one every later
// test of the process would write versions stamped in the future.
package timetest

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// A Clock is a fake clock that moves only when told to.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a clock set a minute after both the real time and the
// last version id the process issued.
func NewClock() *Clock {
	start := LastStamp()
	if now := time.Now(); now.After(start) {
		start = now
	}
	return &Clock{now: start.Add(time.Minute)}
}

// Now returns the clock's time: pass it as object.Options.Now.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// LastStamp returns the time of the last version id the process issued
// (it takes one more id to find it). Ids never share a time, so the rows
// of one commit (a rename's new version and its delete marker) are
// stamped a nanosecond or more apart: a write is over at the time of the
// last id issued for it.
func LastStamp() time.Time {
	return meta.NewVersionID(time.Unix(0, 0)).Time().Add(-time.Nanosecond)
}

// env names the test a child process runs alone.
const env = "STRATAFS_TIMETEST_ALONE"

// Alone reports whether the calling test runs in a process of its own:
// then the caller goes on with it. Otherwise Alone runs the test again in
// a child process of the test binary, fails or skips t as the child did,
// and returns false: the caller returns. Only top-level tests can run
// alone.
func Alone(t *testing.T) bool {
	t.Helper()
	if os.Getenv(env) == t.Name() {
		return true
	}
	args := []string{"-test.run=^" + regexp.QuoteMeta(t.Name()) + "$", "-test.count=1", "-test.v"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).String())
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	switch {
	case err != nil:
		t.Fatalf("%s in a process of its own: %v\n%s", t.Name(), err, out)
	case strings.Contains(string(out), "--- SKIP: "+t.Name()):
		t.Skipf("skipped in a process of its own:\n%s", out)
	case !strings.Contains(string(out), "--- PASS: "+t.Name()):
		t.Fatalf("%s did not run in a process of its own:\n%s", t.Name(), out)
	case testing.Verbose():
		t.Logf("in a process of its own:\n%s", out)
	}
	return false
}
