package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/stratafs/stratafs/internal/cputime"
	"github.com/stratafs/stratafs/internal/gcpace"
)

// The servers the figures measure run in processes of their own (this
// binary, started again with childEnv set), as users run them: the S3
// endpoint, so that the CPU time each side spends can be told apart, and
// every FUSE file system, so that the kernel's requests are answered by a
// Go runtime that is not also running the benchmark's clients (whose
// blocking system calls hold the runtime's processors) nor the other
// file systems (whose garbage the collector would scan). A child reads
// one command a line from its stdin and answers each with one line on its
// stdout; it stops when its stdin ends.

// Environment of a child: what it serves ("s3", or a FUSE tree's name),
// its scratch directory, and, when the bench writes profiles (CPU, block,
// mutex), the files the child writes its own to.
const (
	childEnv        = "STRATAFS_BENCH_CHILD"
	childDirEnv     = "STRATAFS_BENCH_CHILD_DIR"
	childProfileEnv = "STRATAFS_BENCH_CHILD_PROFILE"
	childBlockEnv   = "STRATAFS_BENCH_CHILD_BLOCKPROFILE"
	childMutexEnv   = "STRATAFS_BENCH_CHILD_MUTEXPROFILE"
	childDirectEnv  = "STRATAFS_BENCH_CHILD_DIRECT" // set: -direct
)

// cpuCommand asks a child for its CPU time so far, in microseconds.
const cpuCommand = "cpu"

func init() {
	if kind := os.Getenv(childEnv); kind != "" {
		runChild(kind)
		os.Exit(0)
	}
}

// runChild serves kind until the bench closes its stdin.
func runChild(kind string) {
	dir := os.Getenv(childDirEnv)
	*direct = os.Getenv(childDirectEnv) != ""
	defer profile(os.Getenv(childProfileEnv), os.Getenv(childBlockEnv), os.Getenv(childMutexEnv))()
	// Every server, stratafs or the loopbacks, paces its collector as
	// stratafs serve and mount do.
	defer gcpace.Start(gcpace.Headroom)()
	if kind == "s3" {
		serveS3(dir)
	} else {
		serveFUSE(kind, dir)
	}
}

// serveLines prints hello, then answers every command read from stdin
// with the line its handler returns (cpuCommand is always known), until
// stdin ends.
func serveLines(hello string, handlers map[string]func() string) {
	fmt.Println(hello)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch h := handlers[in.Text()]; {
		case in.Text() == cpuCommand:
			fmt.Println(cputime.Used().Microseconds())
		case h != nil:
			fmt.Println(h())
		default:
			check(fmt.Errorf("child: unknown command %q", in.Text()))
		}
	}
	check(in.Err())
}

// A child is a server process, seen from the bench.
type child struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Reader
	hello string // its first line
}

// startChild starts a child serving kind over dir, with env added to its
// environment, and waits for its first line. With -cpuprofile FILE (or
// -blockprofile, -mutexprofile) it writes its own profile to FILE.kind.
func startChild(kind, dir string, env ...string) *child {
	self, err := os.Executable()
	check(err)
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), childEnv+"="+kind, childDirEnv+"="+dir)
	cmd.Env = append(cmd.Env, env...)
	for env, file := range map[string]string{childProfileEnv: *prof, childBlockEnv: *block, childMutexEnv: *mutex} {
		if file != "" {
			cmd.Env = append(cmd.Env, env+"="+file+"."+kind)
		}
	}
	if *direct {
		cmd.Env = append(cmd.Env, childDirectEnv+"=1")
	}
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	check(err)
	out, err := cmd.StdoutPipe()
	check(err)
	check(cmd.Start())
	c := &child{cmd: cmd, in: in, out: bufio.NewReader(out)}
	c.hello = c.line()
	return c
}

func (c *child) line() string {
	l, err := c.out.ReadString('\n')
	check(err)
	return strings.TrimSpace(l)
}

// ask sends the child a command and returns its answer.
func (c *child) ask(command string) string {
	_, err := io.WriteString(c.in, command+"\n")
	check(err)
	return c.line()
}

// cpu asks the child for its CPU time so far.
func (c *child) cpu() time.Duration {
	us, err := strconv.ParseInt(c.ask(cpuCommand), 10, 64)
	check(err)
	return time.Duration(us) * time.Microsecond
}

// stop ends the child and waits for it (and its profile).
func (c *child) stop() {
	check(c.in.Close())
	check(c.cmd.Wait())
}
