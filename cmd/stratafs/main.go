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

	"github.com/stratafs/stratafs/internal/gcpace"
)

// A command is one subcommand of the stratafs binary.
type command struct {
	name  string
	usage string
	run   func(ctx context.Context, env *env, args []string) error
}

// env carries what every command shares: the store flags and output
// streams.
type env struct {
	dataDir string // the data directory: embedded stores, credentials, staging
	meta    string // meta store URL; empty for bolt under dataDir
	data    string // chunk store URL; empty for files under dataDir
	stdin   io.Reader
	stdout  io.Writer
	stderr  io.Writer
	// envTwins is set for long-running commands: every flag of theirs
	// that the command line leaves unset takes its environment twin.
	envTwins bool
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
		{"mount", "mount BUCKET DIR [--as-of TIME] [--read-only] [--allow-other] [--uid N] [--gid N] [--umask 022] [--attr-timeout 1s] [--entry-timeout 1s]", configured(runMount)},
		{"serve", "serve [--listen ADDR] [--region R] [--domain D] [--tls-cert F --tls-key F] [--log-level L] [--max-writes N] [--max-requests N] [--max-reads N] [--metrics-listen ADDR] [--gc-interval 1h] [--gc-grace 1h] [--mount BUCKET:DIR]… [mount flags]", configured(runServe)},
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
	// The store flags' environment twins are read first, so that they
	// count below the flags given before or after the command.
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr,
		dataDir: envOr(envName("data-dir"), "./stratafs-data"),
		meta:    os.Getenv(envName("meta")),
		data:    os.Getenv(envName("data")),
	}
	global := flag.NewFlagSet("stratafs", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	storeFlags(global, e)
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
	fmt.Fprintln(w, "usage: stratafs [--data-dir DIR] [--meta URL] [--data URL] COMMAND [ARGS]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  stratafs %s\n", c.usage)
	}
	fmt.Fprintln(w, "\nstore flags, before or after any command:")
	global.SetOutput(w)
	global.PrintDefaults()
	fmt.Fprintln(w, "\nEvery flag of serve and mount can also be set in the environment, as\n"+
		"STRATAFS_ and its name in capitals with _ for - (--gc-grace: STRATAFS_GC_GRACE);\n"+
		"a flag on the command line wins over the environment.")
}

// storeFlags registers on fs the flags that say which stores a command
// opens, with e's values so far as their defaults: each command accepts
// them too, so they may come before or after its name.
func storeFlags(fs *flag.FlagSet, e *env) {
	fs.StringVar(&e.dataDir, "data-dir", e.dataDir,
		"directory of the embedded stores, credentials and staging files (env STRATAFS_DATA_DIR)")
	fs.StringVar(&e.meta, "meta", e.meta,
		"meta store URL: bolt:///path/meta.db, memory://, tikv://pd1:2379,pd2:2379[?prefix=p] or\n"+
			"cassandra://h1,h2/keyspace[?shards=64&timeout=10s…]; default bolt under --data-dir (env STRATAFS_META)")
	fs.StringVar(&e.data, "data", e.data,
		"chunk store URL: file:///path or s3://bucket/prefix[?endpoint=…&region=…]; default files under --data-dir (env STRATAFS_DATA)")
}

// configured marks a long-running command, set up in unit files and
// containers: every flag of it has an environment twin. The flags of
// one-shot commands name what to act on (--version, --bucket) and have
// none: a STRATAFS_VERSION left in the environment must never choose the
// version rm deletes. A long-running command also paces the garbage
// collector (gcpace).
func configured(run func(context.Context, *env, []string) error) func(context.Context, *env, []string) error {
	return func(ctx context.Context, e *env, args []string) error {
		e.envTwins = true
		defer gcpace.Start(gcpace.Headroom)()
		return run(ctx, e, args)
	}
}

// envName returns the environment twin of the flag name.
func envName(flag string) string {
	return "STRATAFS_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

func envOr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

// parse parses a command's flags, which may come before, between or after
// its positional arguments, and the store flags among them; it checks the
// number of positionals. For a configured command, flags left unset take
// their environment twins.
func (e *env) parse(fs *flag.FlagSet, args []string, min, max int) ([]string, error) {
	fs.SetOutput(io.Discard)
	var own []*flag.Flag // the command's flags, without the store flags
	fs.VisitAll(func(f *flag.Flag) { own = append(own, f) })
	storeFlags(fs, e)
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
	if e.envTwins {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		for _, f := range own {
			v, ok := os.LookupEnv(envName(f.Name))
			if !ok || given[f.Name] {
				continue
			}
			if err := f.Value.Set(v); err != nil {
				return nil, fmt.Errorf("%s=%q: %v: %w", envName(f.Name), v, err, errUsage)
			}
		}
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
