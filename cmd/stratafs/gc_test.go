package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratafs/stratafs/gc"
)

func TestCLIRetention(t *testing.T) {
	c := cli{t, t.TempDir()}
	c.ok("", "bucket", "create", "docs")
	if got := c.ok("", "bucket", "retention", "docs"); got != "no retention rules\n" {
		t.Fatalf("rules of a new bucket: %q", got)
	}
	c.ok("", "bucket", "retention", "docs", "--noncurrent-days", "30", "--newer-noncurrent", "2", "--expired-marker")
	c.ok("", "bucket", "retention", "docs", "--id", "logs", "--prefix", "logs/", "--expiration-days", "90", "--abort-uploads-days", "7")
	got := c.ok("", "bucket", "retention", "docs")
	for _, want := range []string{
		`default  ""       enabled  noncurrent-days=30 newer-noncurrent=2 expired-marker`,
		`logs     "logs/"  enabled  expiration-days=90 abort-uploads-days=7`,
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("rules:\n%s\nwant a line %q", got, want)
		}
	}
	// A rule replaces the one of its ID; --clear removes one or all.
	c.ok("", "bucket", "retention", "docs", "--noncurrent-days", "1")
	if got := c.ok("", "bucket", "retention", "docs", "--id", "logs", "--clear"); strings.Contains(got, "logs") || !strings.Contains(got, "noncurrent-days=1\n") {
		t.Fatalf("after replacing default and clearing logs:\n%s", got)
	}
	if got := c.ok("", "bucket", "retention", "docs", "--clear"); got != "no retention rules\n" {
		t.Fatalf("after --clear: %q", got)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"bucket", "retention", "docs", "--expiration-days", "1", "--expired-marker"}, 1, "cannot be specified with Days"},
		{[]string{"bucket", "retention", "docs", "--noncurrent-days", "-1"}, 1, "invalid argument"},
		{[]string{"bucket", "retention", "docs", "--clear", "--noncurrent-days", "1"}, 2, "--clear"},
		{[]string{"bucket", "retention", "nope"}, 1, "no such bucket"},
		{[]string{"gc", "--grace", "0s"}, 2, "--grace"},
		{[]string{"gc", "--bucket", "nope"}, 1, "no such bucket"},
	} {
		if code, _, errOut := c.run("", tc.args...); code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("stratafs %v: exit %d, %q; want exit %d mentioning %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}
}

func TestCLIGCAndFsck(t *testing.T) {
	c := cli{t, t.TempDir()}
	c.ok("", "bucket", "create", "docs")
	c.ok(strings.Repeat("x", 10000), "put", "docs/a", "-")
	c.ok(strings.Repeat("y", 10000), "put", "docs/b", "-")
	c.ok("", "rm", "docs/b") // unversioned: its chunk is garbage, but young
	if got := c.ok("", "gc", "--dry-run"); !strings.Contains(got, "chunks: 2 (19.5 KiB), 1 unreferenced, 0 to reclaim") || !strings.Contains(got, "dry run") {
		t.Fatalf("gc --dry-run:\n%s", got)
	}
	if got := c.ok("", "gc", "--grace", "1h"); !strings.Contains(got, "0 reclaimed") {
		t.Fatalf("gc:\n%s", got)
	}
	if got := c.ok("", "fsck"); !strings.Contains(got, "orphan") || !strings.Contains(got, "kept: younger than the grace period") {
		t.Fatalf("fsck:\n%s", got)
	}

	var chunks []string
	filepath.WalkDir(filepath.Join(c.dir, "chunks"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			chunks = append(chunks, p)
		}
		return err
	})
	// Once old, docs/b's chunk is condemned by one run and deleted by the
	// next one a grace period later.
	old := time.Now().Add(-2 * time.Hour)
	for _, p := range chunks {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.ok("", "gc", "--grace", "1ms"); !strings.Contains(got, "0 reclaimed") || !strings.Contains(got, "1 condemned") {
		t.Fatalf("gc of an old unreferenced chunk:\n%s", got)
	}
	if got := c.ok("", "gc", "--grace", "1ms"); !strings.Contains(got, "1 reclaimed") || !strings.Contains(got, "0 condemned") {
		t.Fatalf("gc of a condemned chunk:\n%s", got)
	}

	// Lose a chunk of docs/a: fsck names the row and fails.
	for _, p := range chunks {
		os.Remove(p)
	}
	code, out, errOut := c.run("", "fsck", "--repair")
	if code != 1 || !strings.Contains(out, "missing  docs/a") || !strings.Contains(errOut, "1 rows or parts name 1 missing chunks") {
		t.Fatalf("fsck of a lost chunk: exit %d\n%s%s", code, out, errOut)
	}
}

// TestGCMetricsProgress: /metrics shows where a run is while it runs, and
// idle with the last run's figures after it.
func TestGCMetricsProgress(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newGCMetrics(reg)
	gauges := func() map[string]float64 {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, mt := range mf.GetMetric() {
				name := mf.GetName()
				for _, l := range mt.GetLabel() {
					name += "/" + l.GetValue()
				}
				if g := mt.GetGauge(); g != nil {
					got[name] = g.GetValue()
				}
			}
		}
		return got
	}
	m.progress(gc.Progress{Phase: "sweep", Stats: gc.Stats{Rows: 5, Chunks: 7, ReclaimedBytes: 9}})
	g := gauges()
	if g["stratafs_gc_run_phase/sweep"] != 1 || g["stratafs_gc_run_phase/scan"] != 0 || g["stratafs_gc_run_phase/idle"] != 0 ||
		g["stratafs_gc_run_rows_read"] != 5 || g["stratafs_gc_run_chunks_swept"] != 7 || g["stratafs_gc_run_reclaimed_bytes"] != 9 {
		t.Fatalf("during a sweep: %v", g)
	}
	m.observe("completed", &gc.Stats{Rows: 6, Chunks: 8, ReclaimedBytes: 10})
	if g = gauges(); g["stratafs_gc_run_phase/idle"] != 1 || g["stratafs_gc_run_phase/sweep"] != 0 || g["stratafs_gc_run_reclaimed_bytes"] != 10 {
		t.Fatalf("after the run: %v", g)
	}
}

// TestGCProgressLine: on a terminal, stratafs gc redraws one line with the
// run's phase and counts, and erases it before the summary.
func TestGCProgressLine(t *testing.T) {
	var b strings.Builder
	p := &progress{w: &b}
	p.show(gc.Progress{Phase: "scan", Bucket: "docs", Key: "a/b", Stats: gc.Stats{Rows: 1200, NoncurrentExpired: 3}})
	if got := b.String(); !strings.Contains(got, `scan docs at "a/b": 1200 rows, 3 expired`) {
		t.Fatalf("scan line: %q", got)
	}
	p.last = time.Time{} // redraws are throttled; this one is due
	p.show(gc.Progress{Phase: "scan", Bucket: "docs", Key: "c", Stats: gc.Stats{ResumedBucket: "docs", ResumedKey: "a/b"}})
	if got := b.String(); !strings.Contains(got, `scan docs at "c": 0 rows, 0 expired, 0 uploads aborted (resumed after docs "a/b")`) {
		t.Fatalf("scan line of a resumed run: %q", got)
	}
	p.last = time.Time{}
	p.show(gc.Progress{Phase: "sweep", Stats: gc.Stats{Chunks: 5000, Unreferenced: 7, Condemned: 4, Reclaimed: 2, ReclaimedBytes: 2048}})
	if got := b.String(); !strings.Contains(got, "\rsweep: 5000 chunks, 7 unreferenced, 4 condemned, 2 reclaimed (2.0 KiB)") {
		t.Fatalf("sweep line: %q", got)
	}
	b.Reset()
	p.clear()
	if got := b.String(); strings.Trim(got, "\r ") != "" || !strings.HasSuffix(got, "\r") {
		t.Fatalf("clear: %q", got)
	}
}
