// Package testproc runs a test in a process of its own. Some tests move
// state that lasts as long as the process: a fake clock ahead of the real
// one drags meta's version-id clock along (the ids a process issues never
// run backwards), so every later test of the process would write versions
// stamped in the future.
package testproc

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// env names the test a child process runs alone.
const env = "STRATAFS_TESTPROC"

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
