package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// withService runs fn on the embedded store and closes it afterwards.
func withService(e *env, fn func(*object.Service) error) error {
	svc, closeAll, err := openService(e, nil)
	if err != nil {
		return err
	}
	err = fn(svc)
	if cerr := closeAll(); err == nil {
		err = cerr
	}
	return err
}

func runBucket(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("missing subcommand: %w", errUsage)
	}
	sub := args[0]
	fs := flag.NewFlagSet("bucket "+sub, flag.ContinueOnError)
	switch sub {
	case "ls":
		if _, err := e.parse(fs, args[1:], 0, 0); err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			bs, err := svc.Buckets(ctx)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
			for _, b := range bs {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", b.Created.Format(time.RFC3339), b.Versioning, b.Name)
			}
			return tw.Flush()
		})
	case "create", "rm":
		pos, err := e.parse(fs, args[1:], 1, 1)
		if err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			if sub == "rm" {
				return svc.DeleteBucket(ctx, pos[0])
			}
			_, err := svc.CreateBucket(ctx, pos[0], "")
			return err
		})
	case "retention":
		return runRetention(ctx, e, args[1:])
	case "versioning":
		pos, err := e.parse(fs, args[1:], 1, 2)
		if err != nil {
			return err
		}
		return withService(e, func(svc *object.Service) error {
			if len(pos) == 1 {
				b, err := svc.Bucket(ctx, pos[0])
				if err == nil {
					fmt.Fprintln(e.stdout, b.Versioning)
				}
				return err
			}
			state, err := meta.ParseVersioning(pos[1])
			if err != nil {
				return err
			}
			_, err = svc.SetVersioning(ctx, pos[0], state)
			return err
		})
	}
	return fmt.Errorf("unknown subcommand %q: %w", sub, errUsage)
}

func runPut(ctx context.Context, e *env, args []string) error {
	pos, err := e.parse(flag.NewFlagSet("put", flag.ContinueOnError), args, 2, 2)
	if err != nil {
		return err
	}
	bucket, key, err := splitPath(pos[0], true)
	if err != nil {
		return err
	}
	src, size := e.stdin, int64(-1)
	if pos[1] != "-" {
		f, err := os.Open(pos[1])
		if err != nil {
			return err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
		src = f
	}
	return withService(e, func(svc *object.Service) error {
		v, err := svc.Put(ctx, bucket, key, src, object.PutOptions{Size: size})
		if err == nil {
			fmt.Fprintf(e.stdout, "%s\t%d\t%s\n", v.WireID(), v.Size, v.ETag)
		}
		return err
	})
}

func runGet(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("get", flag.ContinueOnError)
	version := fs.String("version", "", "version id to read (\"null\" allowed)")
	asOf := fs.String("as-of", "", "read the version that was latest at this RFC 3339 instant")
	pos, err := e.parse(fs, args, 1, 2)
	if err != nil {
		return err
	}
	bucket, key, err := splitPath(pos[0], true)
	if err != nil {
		return err
	}
	out := "-"
	if len(pos) == 2 {
		out = pos[1]
	}
	return withService(e, func(svc *object.Service) error {
		id := *version
		if *asOf != "" {
			if id != "" {
				return fmt.Errorf("--version and --as-of exclude each other: %w", errUsage)
			}
			v, err := latestAsOf(ctx, svc, bucket, key, *asOf)
			if err != nil {
				return err
			}
			id = v.WireID()
		}
		obj, err := svc.Get(ctx, bucket, key, id, 0, -1)
		if err != nil {
			return err
		}
		defer obj.Body.Close()
		return writeOut(e, out, obj.Body)
	})
}

// latestAsOf finds the version of key a listing at the instant shows.
func latestAsOf(ctx context.Context, svc *object.Service, bucket, key, instant string) (*meta.Version, error) {
	at, err := parseTime(instant)
	if err != nil {
		return nil, err
	}
	page, err := svc.ListAsOf(ctx, bucket, at, meta.ListOptions{Prefix: key, MaxKeys: 1})
	if err != nil {
		return nil, err
	}
	if len(page.Objects) == 0 || page.Objects[0].Key != key {
		return nil, fmt.Errorf("%s/%s as of %s: %w", bucket, key, instant, meta.ErrNoSuchKey)
	}
	return page.Objects[0], nil
}

// writeOut copies r to the named file ("-" is standard output), replacing
// the file only once every byte arrived.
func writeOut(e *env, name string, r io.Reader) error {
	if name == "-" {
		_, err := io.Copy(e.stdout, r)
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".stratafs-get-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, r); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), name)
}

func runRm(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("rm", flag.ContinueOnError)
	version := fs.String("version", "", "remove this version permanently (\"null\" allowed)")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	bucket, key, err := splitPath(pos[0], true)
	if err != nil {
		return err
	}
	return withService(e, func(svc *object.Service) error {
		res, err := svc.Delete(ctx, bucket, key, object.DeleteOptions{VersionID: *version})
		if err != nil {
			return err
		}
		switch {
		case *version != "":
			fmt.Fprintf(e.stdout, "removed version %s\n", res.VersionID)
		case res.DeleteMarker:
			fmt.Fprintf(e.stdout, "delete marker %s\n", res.VersionID)
		default:
			fmt.Fprintln(e.stdout, "removed")
		}
		return nil
	})
}

func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("time %q is not RFC 3339 (2026-12-02T10:15:00Z): %w", s, errUsage)
	}
	return t, nil
}
