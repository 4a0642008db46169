package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// runGC collects once: retention, stale uploads, unreferenced chunks.
func runGC(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("gc", flag.ContinueOnError)
	dry := fs.Bool("dry-run", false, "report what a collection would do and change nothing")
	bucket := fs.String("bucket", "", "apply only this bucket's retention rules (chunks are swept across all buckets)")
	grace := fs.Duration("grace", gc.DefaultGrace, "how old an unreferenced chunk must be to be condemned, and how long condemned before a later run deletes it")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *grace <= 0 {
		return fmt.Errorf("--grace must be positive: %w", errUsage)
	}
	return withService(e, func(svc *object.Service) error {
		p := newProgress(e.stderr)
		st, err := gc.Run(ctx, svc, gc.Options{
			Bucket:   *bucket,
			DryRun:   *dry,
			Grace:    *grace,
			Progress: p.show,
			Logger:   warnings(e.stderr),
		})
		p.clear()
		if st != nil {
			printSummary(e.stdout, st, *dry)
		}
		return err
	})
}

// runFsck checks that every row's chunks exist and finds orphan chunks.
func runFsck(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("fsck", flag.ContinueOnError)
	repair := fs.Bool("repair", false, "condemn orphan chunks older than the grace period and delete those condemned as long ago (rows naming missing chunks are only reported)")
	grace := fs.Duration("grace", gc.DefaultGrace, "how old an orphan chunk must be to be condemned by --repair, and how long condemned to be deleted")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *grace <= 0 {
		return fmt.Errorf("--grace must be positive: %w", errUsage)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 8, 2, ' ', 0)
	err := withService(e, func(svc *object.Service) error {
		p := newProgress(e.stderr)
		st, err := gc.Fsck(ctx, svc, gc.FsckOptions{
			Repair: *repair,
			Grace:  *grace,
			Missing: func(m gc.Missing) {
				p.clear()
				where := m.VersionID
				if m.UploadID != "" {
					where = fmt.Sprintf("upload %s part %d", m.UploadID, m.Part)
				}
				fmt.Fprintf(tw, "missing\t%s/%s\t%s\t%s\t%v\n", m.Bucket, m.Key, where, m.Chunk, m.Err)
			},
			Orphan: func(o gc.Orphan) {
				p.clear()
				fate := "kept: younger than the grace period"
				switch {
				case o.Due && *repair:
					fate = "removed"
				case o.Due:
					fate = "removable"
				case o.Collectable && *repair:
					fate = "condemned: removed by a run the grace period from now"
				case o.Collectable:
					fate = "condemnable"
				}
				fmt.Fprintf(tw, "orphan\t%s\t%s\t%s\t%s\n", o.Chunk, bytesize(o.Size), o.Modified.UTC().Format(time.RFC3339), fate)
			},
			Progress: p.show,
			Logger:   warnings(e.stderr),
		})
		p.clear()
		if err != nil {
			return err
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "checked %d rows and %d upload parts in %d buckets, %d chunks (%s), in %v\n",
			st.Rows, st.Parts, st.Buckets, st.Chunks, bytesize(st.ChunkBytes), st.Elapsed.Round(time.Millisecond))
		fate := "removable"
		if *repair && st.Unreadable == 0 {
			fate = "removed"
		}
		fmt.Fprintf(e.stdout, "%d orphan chunks (%s), %d of them %s (%s), %d %s\n", st.Unreferenced, bytesize(st.UnreferencedBytes),
			st.Reclaimed, fate, bytesize(st.ReclaimedBytes), st.Condemned, condemnVerb(!*repair))
		var problems []string
		if st.Missing > 0 {
			problems = append(problems, fmt.Sprintf("%d rows or parts name %d missing chunks", st.Damaged, st.Missing))
		}
		if st.Unreadable > 0 {
			problems = append(problems, fmt.Sprintf("%d manifests cannot be read", st.Unreadable))
		}
		if len(problems) > 0 {
			return errors.New(strings.Join(problems, "; "))
		}
		return nil
	})
	if ferr := tw.Flush(); err == nil {
		err = ferr
	}
	return err
}

func printSummary(w io.Writer, st *gc.Stats, dry bool) {
	verb := "reclaimed"
	if dry {
		verb = "to reclaim"
	}
	fmt.Fprintf(w, "expired: %d current versions, %d noncurrent versions, %d delete markers\n",
		st.CurrentExpired, st.NoncurrentExpired, st.MarkersRemoved)
	fmt.Fprintf(w, "uploads: %d aborted, %d completed records dropped\n", st.UploadsAborted, st.UploadsDropped)
	if st.OrphanBuckets > 0 {
		fmt.Fprintf(w, "deleted buckets still holding records: %d, %d records removed\n", st.OrphanBuckets, st.OrphanRecords)
	}
	fmt.Fprintf(w, "chunks: %d (%s), %d unreferenced, %d %s (%s), %d %s, %d pardoned\n", st.Chunks, bytesize(st.ChunkBytes),
		st.Unreferenced, st.Reclaimed, verb, bytesize(st.ReclaimedBytes), st.Condemned, condemnVerb(dry), st.Pardoned)
	if st.Condemned > 0 {
		fmt.Fprintln(w, "condemned chunks are deleted by the first run at least the grace period later that finds them still unreferenced")
	}
	fmt.Fprintf(w, "read %d rows and %d upload parts of %d buckets in %v\n", st.Rows, st.Parts, st.Buckets, st.Elapsed.Round(time.Millisecond))
	if st.ResumedBucket != "" {
		fmt.Fprintf(w, "resumed where an interrupted run stopped: after %s %q, then round to it\n", st.ResumedBucket, st.ResumedKey)
	}
	if dry {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
}

// condemnVerb says what happens to chunks condemned by a run, or by a
// dry run.
func condemnVerb(dry bool) string {
	if dry {
		return "to condemn"
	}
	return "condemned"
}

// warnings logs the collector's warnings and errors on w.
func warnings(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// A progress shows a run's progress on one line of a terminal, redrawn
// at most five times a second; on anything else it shows nothing.
type progress struct {
	w     io.Writer
	last  time.Time
	width int
}

func newProgress(w io.Writer) *progress {
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			return &progress{w: w}
		}
	}
	return &progress{}
}

func (p *progress) show(pr gc.Progress) {
	if p.w == nil || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	var line string
	switch pr.Phase {
	case "count":
		line = "counting chunks"
	case "scan":
		line = fmt.Sprintf("scan %s at %q: %d rows, %d expired, %d uploads aborted",
			pr.Bucket, pr.Key, pr.Rows, pr.CurrentExpired+pr.NoncurrentExpired+pr.MarkersRemoved, pr.UploadsAborted)
		if pr.ResumedBucket != "" {
			line += fmt.Sprintf(" (resumed after %s %q)", pr.ResumedBucket, pr.ResumedKey)
		}
	default:
		line = fmt.Sprintf("sweep: %d chunks, %d unreferenced, %d condemned, %d reclaimed (%s)",
			pr.Chunks, pr.Unreferenced, pr.Condemned, pr.Reclaimed, bytesize(pr.ReclaimedBytes))
	}
	line += fmt.Sprintf(" [%v]", pr.Elapsed.Round(time.Second))
	fmt.Fprintf(p.w, "\r%-*s", p.width, line)
	p.width = len(line)
}

// clear erases the line, so that other output starts on a clean one.
func (p *progress) clear() {
	if p.w != nil && p.width > 0 {
		fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
		p.width = 0
	}
}

// bytesize formats n bytes with a binary unit.
func bytesize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// runRetention shows or changes a bucket's retention (lifecycle) rules.
// Flags build one rule, which replaces the rule of the same --id.
func runRetention(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("bucket retention", flag.ContinueOnError)
	id := fs.String("id", "default", "the rule's ID: a rule replaces the one of the same ID")
	prefix := fs.String("prefix", "", "apply the rule to keys that start with this")
	noncurrent := fs.Int("noncurrent-days", 0, "remove versions this many days after they became noncurrent")
	newer := fs.Int("newer-noncurrent", 0, "but keep this many newest noncurrent versions (with --noncurrent-days)")
	expiration := fs.Int("expiration-days", 0, "expire current versions this many days after they were written")
	marker := fs.Bool("expired-marker", false, "remove delete markers that have no older versions left")
	abort := fs.Int("abort-uploads-days", 0, "abort multipart uploads this many days after they began")
	clearRules := fs.Bool("clear", false, "remove the rule --id, or every rule when --id is not given")
	pos, err := e.parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	actions := len(given)
	if given["id"] {
		actions--
	}
	if *clearRules && actions > 1 {
		return fmt.Errorf("--clear takes no other rule flags: %w", errUsage)
	}
	return withService(e, func(svc *object.Service) error {
		b, err := svc.Bucket(ctx, pos[0])
		if err != nil {
			return err
		}
		rules := b.Lifecycle
		switch {
		case *clearRules && given["id"]:
			rules = slices.DeleteFunc(slices.Clone(rules), func(r meta.LifecycleRule) bool { return r.ID == *id })
		case *clearRules:
			rules = nil
		case actions > 0:
			r := meta.LifecycleRule{
				ID: *id, Prefix: *prefix, Enabled: true,
				NoncurrentDays: *noncurrent, NewerNoncurrentVersions: *newer,
				ExpirationDays: *expiration, ExpiredObjectDeleteMarker: *marker,
				AbortIncompleteUploadDays: *abort,
			}
			i := slices.IndexFunc(rules, func(o meta.LifecycleRule) bool { return o.ID == r.ID })
			if i < 0 {
				rules = append(slices.Clone(rules), r)
			} else {
				rules = slices.Clone(rules)
				rules[i] = r
			}
		default:
			return printRules(e.stdout, rules)
		}
		if b, err = svc.SetLifecycle(ctx, b.Name, rules); err != nil {
			return err
		}
		return printRules(e.stdout, b.Lifecycle)
	})
}

func printRules(w io.Writer, rules []meta.LifecycleRule) error {
	if len(rules) == 0 {
		_, err := fmt.Fprintln(w, "no retention rules")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPREFIX\tSTATUS\tACTIONS")
	for _, r := range rules {
		var acts []string
		add := func(name string, n int) {
			if n > 0 {
				acts = append(acts, fmt.Sprintf("%s=%d", name, n))
			}
		}
		add("noncurrent-days", r.NoncurrentDays)
		add("newer-noncurrent", r.NewerNoncurrentVersions)
		add("expiration-days", r.ExpirationDays)
		if r.ExpiredObjectDeleteMarker {
			acts = append(acts, "expired-marker")
		}
		add("abort-uploads-days", r.AbortIncompleteUploadDays)
		status := "enabled"
		if !r.Enabled {
			status = "disabled"
		}
		fmt.Fprintf(tw, "%s\t%q\t%s\t%s\n", r.ID, r.Prefix, status, strings.Join(acts, " "))
	}
	return tw.Flush()
}
