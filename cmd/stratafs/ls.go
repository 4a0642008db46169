package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// runLs lists buckets, a bucket's live keys (one level, like ls, unless
// --recursive), every version, or the bucket as of an instant. It pages
// through the listing engine, so memory stays flat for any bucket size.
func runLs(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("ls", flag.ContinueOnError)
	versions := fs.Bool("versions", false, "list every version and delete marker")
	asOf := fs.String("as-of", "", "list the bucket as it was at this RFC 3339 instant")
	recursive := fs.Bool("recursive", false, "list every key under the prefix, not one level")
	pos, err := e.parse(fs, args, 0, 1)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return runBucket(ctx, e, []string{"ls"})
	}
	bucket, prefix, err := splitPath(pos[0], false)
	if err != nil {
		return err
	}
	delim := "/"
	if *recursive {
		delim = ""
	}
	if *versions && *asOf != "" {
		return fmt.Errorf("--versions and --as-of exclude each other: %w", errUsage)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	err = withService(e, func(svc *object.Service) error {
		if *versions {
			return lsVersions(ctx, svc, tw, bucket, meta.VersionListOptions{Prefix: prefix, Delimiter: delim})
		}
		list := func(o meta.ListOptions) (*meta.ListResult, error) { return svc.List(ctx, bucket, o) }
		if *asOf != "" {
			at, err := parseTime(*asOf)
			if err != nil {
				return err
			}
			list = func(o meta.ListOptions) (*meta.ListResult, error) { return svc.ListAsOf(ctx, bucket, at, o) }
		}
		return lsObjects(tw, list, meta.ListOptions{Prefix: prefix, Delimiter: delim, Attrs: true})
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func lsObjects(w io.Writer, list func(meta.ListOptions) (*meta.ListResult, error), o meta.ListOptions) error {
	for {
		page, err := list(o)
		if err != nil {
			return err
		}
		// Objects and common prefixes are each sorted; merge them so the
		// output is in key order as a whole.
		objs, cps := page.Objects, page.CommonPrefixes
		for len(objs) > 0 || len(cps) > 0 {
			if len(cps) > 0 && (len(objs) == 0 || cps[0] < objs[0].Key) {
				fmt.Fprintf(w, "\t\tDIR\t%s\n", cps[0])
				cps = cps[1:]
				continue
			}
			v := objs[0]
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\n", v.LastModified().Format(time.RFC3339), v.Size, v.ETag, v.Key)
			objs = objs[1:]
		}
		if !page.IsTruncated {
			return nil
		}
		o.After = page.Next
	}
}

func lsVersions(ctx context.Context, svc *object.Service, w io.Writer, bucket string, o meta.VersionListOptions) error {
	for {
		page, err := svc.ListVersions(ctx, bucket, o)
		if err != nil {
			return err
		}
		for _, cp := range page.CommonPrefixes {
			fmt.Fprintf(w, "\t\t\tDIR\t%s\n", cp)
		}
		for _, v := range page.Versions {
			state := ""
			switch {
			case v.DeleteMarker && v.IsLatest:
				state = "deleted,latest"
			case v.DeleteMarker:
				state = "deleted"
			case v.IsLatest:
				state = "latest"
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\n", v.LastModified().Format(time.RFC3339Nano), v.Size, v.WireID(), state, v.Key)
		}
		if !page.IsTruncated {
			return nil
		}
		o.KeyMarker, o.VersionIDMarker = page.NextKeyMarker, page.NextVersionIDMarker
	}
}
