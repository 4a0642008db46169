// Command stratafs keeps buckets of versioned objects: it serves them over
// S3, mounts them as directories and manages them from the shell.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// A command is one subcommand of the stratafs binary.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, env *env, args []string) error
}

// env carries what every command shares: global flags and output streams.
type env struct {
	dataDir string
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
}

// errUsage marks an error in how a command was called (exit code 2).
var errUsage = errors.New("usage")

func commands() []command {
	return []command{
		{"bucket", "bucket create|ls|rm|versioning NAME [enabled|suspended] | bucket retention NAME [--noncurrent-days N] [--newer-noncurrent N] [--expiration-days N] [--expired-marker] [--abort-uploads-days N] [--prefix P] [--id ID] [--clear]", runBucket},
		{"put", "put BUCKET/KEY FILE|-", runPut},
		{"get", "get BUCKET/KEY [FILE|-] [--version V] [--as-of TIME]", runGet},
		{"ls", "ls [BUCKET[/PREFIX]] [--versions] [--as-of TIME] [--recursive]", runLs},
		{"rm", "rm BUCKET/KEY [--version V]", runRm},
		{"mount", "mount BUCKET DIR [--read-only] [--allow-other] [--uid N] [--gid N] [--umask 022] [--attr-timeout 1s] [--entry-timeout 1s]", runMount},
		{"serve", "serve [--listen ADDR] [--region R] [--domain D] [--tls-cert F --tls-key F] [--log-level L] [--max-writes N] [--metrics-listen ADDR] [--gc-interval 1h] [--gc-grace 1h] [--mount BUCKET:DIR]… [mount flags]", runServe},
		{"key", "key create [--name N] | ls | rm ID", runKey},
		{"gc", "gc [--dry-run] [--bucket B] [--grace 1h]", runGC},
		{"fsck", "fsck [--repair] [--grace 1h]", runFsck},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr}
	global := flag.NewFlagSet("stratafs", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	global.StringVar(&e.dataDir, "data-dir", envOr("STRATAFS_DATA_DIR", "./stratafs-data"),
		"directory holding the embedded meta store and chunks (env STRATAFS_DATA_DIR)")
	err := global.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		usage(stdout, global)
		return 0
	}
	if err != nil || global.NArg() == 0 {
		usage(stderr, global)
		return 2
	}
	name, rest := global.Arg(0), global.Args()[1:]
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, e, rest)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "stratafs: %v\nusage: stratafs %s\n", err, c.usage)
			return 2
		default:
			fmt.Fprintf(stderr, "stratafs %s: %v\n", name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "stratafs: unknown command %q\n", name)
	usage(stderr, global)
	return 2
}

func usage(w io.Writer, global *flag.FlagSet) {
	fmt.Fprintln(w, "usage: stratafs [--data-dir DIR] COMMAND [ARGS]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  stratafs %s\n", c.usage)
	}
	fmt.Fprintln(w, "\nglobal flags:")
	global.SetOutput(w)
	global.PrintDefaults()
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// parse parses a command's flags, which may come before, between or after
// its positional arguments, and checks the number of positionals.
func parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%v: %w", err, errUsage)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) < min || len(pos) > max {
		return nil, fmt.Errorf("wrong number of arguments: %w", errUsage)
	}
	return pos, nil
}

// splitPath splits BUCKET/KEY; the key may be empty when allowed.
func splitPath(p string, needKey bool) (bucket, key string, err error) {
	bucket, key, _ = strings.Cut(p, "/")
	if bucket == "" || needKey && key == "" {
		return "", "", fmt.Errorf("%q is not BUCKET/KEY: %w", p, errUsage)
	}
	return bucket, key, nil
}
