package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// shutdownGrace is how long a stopping server lets requests in flight
// finish before it cuts their connections. Uploads cut short commit
// nothing: a version becomes visible only once its body arrived whole.
const shutdownGrace = 60 * time.Second

// runServe serves the S3 API over the embedded store until SIGINT or
// SIGTERM, then finishes the requests in flight and exits.
func runServe(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9000", "address to serve S3 on")
	region := fs.String("region", "us-east-1", "region clients sign for")
	domains := fs.String("domain", "localhost",
		"comma-separated domains of virtual-hosted-style requests, BUCKET.DOMAIN")
	tlsCert := fs.String("tls-cert", "", "serve HTTPS with this certificate file")
	tlsKey := fs.String("tls-key", "", "and this key file")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	var mounts [][2]string
	fs.Func("mount", "also mount a bucket, as BUCKET:DIR (repeatable); the mount flags below apply", func(v string) error {
		bucket, dir, ok := strings.Cut(v, ":")
		if !ok || bucket == "" || dir == "" {
			return fmt.Errorf("--mount %q is not BUCKET:DIR", v)
		}
		mounts = append(mounts, [2]string{bucket, dir})
		return nil
	})
	mountOptions := mountFlags(fs)
	metricsListen := fs.String("metrics-listen", "",
		"serve Prometheus metrics on this address at /metrics; off when empty")
	maxWrites := fs.String("max-writes", strconv.Itoa(s3.DefaultMaxWrites),
		"request bodies stored at once; each holds up to 3 chunk buffers of 8 MiB")
	maxReads := fs.String("max-reads", strconv.Itoa(s3.DefaultMaxReads),
		"GetObject bodies sent at once, each with up to 8 MiB read ahead; more are answered 503 SlowDown")
	maxRequests := fs.String("max-requests", strconv.Itoa(s3.DefaultMaxRequests),
		"S3 requests served at once; more are answered 503 SlowDown")
	gcInterval := fs.String("gc-interval", gc.DefaultInterval.String(),
		"collect (apply retention, abort stale uploads, delete unreferenced chunks) at start and then this often; 0 disables")
	gcGrace := fs.String("gc-grace", gc.DefaultGrace.String(),
		"how old an unreferenced chunk must be for the collector to condemn it, and how long condemned before a later run deletes it")
	if _, err := e.parse(fs, args, 0, 0); err != nil {
		return err
	}
	limits := map[string]int{} // by flag name
	for name, v := range map[string]string{"max-writes": *maxWrites, "max-reads": *maxReads, "max-requests": *maxRequests} {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return fmt.Errorf("--%s %q: want a number of at least 1: %w", name, v, errUsage)
		}
		limits[name] = n
	}
	interval, err := time.ParseDuration(*gcInterval)
	if err != nil || interval < 0 {
		return fmt.Errorf("--gc-interval %q: want a duration, or 0 to disable: %w", *gcInterval, errUsage)
	}
	grace, err := time.ParseDuration(*gcGrace)
	if err != nil || grace <= 0 {
		return fmt.Errorf("--gc-grace %q: want a positive duration: %w", *gcGrace, errUsage)
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		return fmt.Errorf("--tls-cert and --tls-key go together: %w", errUsage)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level %q: %w", *logLevel, errUsage)
	}
	logger := slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: level}))

	// Metrics first: the stores register theirs (data/s3's) when they open.
	var reg prometheus.Registerer // nil: no metrics
	var metrics *s3.Metrics
	if *metricsListen != "" {
		stop, r, err := serveMetrics(*metricsListen, e.stdout, logger)
		if err != nil {
			return err
		}
		defer stop()
		reg, metrics = r, s3.NewMetrics(r)
	}
	svc, closeAll, err := openService(e, reg)
	if err != nil {
		return err
	}
	defer closeAll()
	creds, source, err := rootCredentials(e.dataDir)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	if interval > 0 {
		// Deferred after closeAll, so it runs before: a run in progress
		// gives up before the stores close.
		defer startCollector(ctx, svc, interval, grace, logger, reg)()
	}
	h := s3.New(svc, s3.Config{
		Region:        *region,
		Domains:       splitList(*domains),
		Keys:          sigv4.StaticKeys{creds.AccessKey: creds.SecretKey},
		RootAccessKey: creds.AccessKey,
		Logger:        logger,
		MaxWrites:     limits["max-writes"],
		MaxReads:      limits["max-reads"],
		MaxRequests:   limits["max-requests"],
		Metrics:       metrics,
	})
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if *tlsCert != "" {
		scheme = "https"
	}
	endpoint := scheme + "://" + displayAddr(ln.Addr())
	printUsage(e.stdout, endpoint, *region, e.dataDir, creds, source)
	if len(mounts) > 0 {
		o, err := mountOptions(e)
		if err != nil {
			return err
		}
		for _, bd := range mounts {
			m, err := mountBucket(ctx, e, svc, bd[0], bd[1], o)
			if err != nil {
				return err
			}
			// Deferred after closeAll, so it runs before: the mount's
			// queued changes commit before the stores close.
			defer unmount(e, m)
		}
	}

	served := make(chan error, 1)
	go func() {
		if *tlsCert != "" {
			served <- srv.ServeTLS(ln, *tlsCert, *tlsKey)
		} else {
			served <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	logger.Info("stopping: waiting for requests in flight", "grace", shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// serveMetrics serves the metrics registered with reg, and the Go
// runtime's and the process's, at http://addr/metrics, on a listener of
// its own so that the S3 address exposes nothing unauthenticated. stop
// closes it.
func serveMetrics(addr string, stdout io.Writer, logger *slog.Logger) (stop func(), reg *prometheus.Registry, err error) {
	reg = prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics server stopped", "err", err)
		}
	}()
	fmt.Fprintf(stdout, "stratafs: metrics on http://%s/metrics\n", displayAddr(ln.Addr()))
	return func() { srv.Close() }, reg, nil
}

// startCollector runs the collector in the background (gc.Worker): a run
// at once and then every interval, each logged and, when reg is set,
// counted in the collector's metrics. stop ends it, waiting for a run in
// progress to give up.
func startCollector(ctx context.Context, svc *object.Service, interval, grace time.Duration, logger *slog.Logger,
	reg prometheus.Registerer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	m := newGCMetrics(reg)
	log := logger.With("component", "gc")
	w := &gc.Worker{
		Interval: interval,
		Options:  gc.Options{Grace: grace, Logger: log, Progress: m.progress},
		Done: func(st *gc.Stats, err error) {
			outcome := runOutcome(ctx, err)
			m.observe(outcome, st)
			if outcome == "skipped" {
				return // the worker logs it, as a debug line
			}
			attrs := []slog.Attr{
				slog.String("outcome", outcome), slog.Int64("rows", st.Rows),
				slog.Int64("current_expired", st.CurrentExpired), slog.Int64("noncurrent_expired", st.NoncurrentExpired),
				slog.Int64("markers_removed", st.MarkersRemoved), slog.Int64("uploads_aborted", st.UploadsAborted),
				slog.Int64("uploads_dropped", st.UploadsDropped), slog.Int64("orphan_records", st.OrphanRecords),
				slog.Int64("chunks", st.Chunks),
				slog.Int64("chunks_reclaimed", st.Reclaimed), slog.Int64("bytes_reclaimed", st.ReclaimedBytes),
				slog.Duration("took", st.Elapsed),
			}
			if st.ResumedBucket != "" {
				attrs = append(attrs, slog.String("resumed_bucket", st.ResumedBucket), slog.String("resumed_after", st.ResumedKey))
			}
			if err != nil {
				attrs = append(attrs, slog.String("err", err.Error()))
			}
			log.LogAttrs(ctx, slog.LevelInfo, "collection", attrs...)
		},
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, svc)
	}()
	return func() {
		cancel()
		<-done
	}
}

// gcMetrics are the collector's Prometheus figures, summed over the runs
// of this process.
type gcMetrics struct {
	runs      *prometheus.CounterVec // by outcome
	expired   *prometheus.CounterVec // versions, current or noncurrent
	markers   prometheus.Counter
	uploads   prometheus.Counter
	orphans   prometheus.Counter
	chunks    prometheus.Counter
	bytes     prometheus.Counter
	condemned prometheus.Counter
	pardoned  prometheus.Counter
	duration  prometheus.Gauge
	// The run in progress, or the last one: where it is and what it did
	// so far, updated as it advances.
	phase                       *prometheus.GaugeVec // 1 for the phase in progress, 0 for the others
	rows, swept, reclaimedSoFar prometheus.Gauge
}

// gcPhases are the phases of a run (gc.Progress.Phase), and "idle".
var gcPhases = []string{"count", "scan", "orphans", "sweep", "idle"}

// newGCMetrics returns the collector's metrics registered with reg; nil,
// which counts nothing, when reg is nil.
func newGCMetrics(reg prometheus.Registerer) *gcMetrics {
	if reg == nil {
		return nil
	}
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "stratafs", Subsystem: "gc", Name: name, Help: help})
	}
	m := &gcMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stratafs", Subsystem: "gc", Name: "runs_total",
			Help: "Collector runs, by outcome: completed, failed, canceled (by shutdown) or skipped (another collector held the lease).",
		}, []string{"outcome"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "stratafs", Subsystem: "gc", Name: "versions_expired_total",
			Help: "Versions expired by retention rules: current ones (Expiration) or noncurrent ones (NoncurrentVersionExpiration).",
		}, []string{"version"}),
		markers:   counter("delete_markers_removed_total", "Delete markers removed as their key's only row."),
		uploads:   counter("uploads_aborted_total", "Incomplete multipart uploads aborted (AbortIncompleteMultipartUpload)."),
		orphans:   counter("orphan_records_removed_total", "Records left under deleted buckets' ids by writes that raced the deletion, removed (partitions on Cassandra)."),
		chunks:    counter("chunks_reclaimed_total", "Unreferenced chunks deleted."),
		bytes:     counter("reclaimed_bytes_total", "Bytes of the unreferenced chunks deleted."),
		condemned: counter("chunks_condemned_total", "Unreferenced chunks condemned: deleted by a run at least the grace period later that finds them unreferenced still."),
		pardoned:  counter("chunks_pardoned_total", "Condemned chunks found referenced again, and kept."),
		duration: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "stratafs", Subsystem: "gc", Name: "last_run_duration_seconds",
			Help: "How long the last run that was not skipped took."}),
		phase: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: "stratafs", Subsystem: "gc", Name: "run_phase",
			Help: "1 for the phase the collector is in (count, scan, orphans, sweep; idle between runs), 0 for the others."}, []string{"phase"}),
		rows: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "stratafs", Subsystem: "gc", Name: "run_rows_read",
			Help: "Version rows read by the run in progress, or by the last run."}),
		swept: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "stratafs", Subsystem: "gc", Name: "run_chunks_swept",
			Help: "Chunks of the chunk store the sweep of the run in progress, or of the last run, has walked."}),
		reclaimedSoFar: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "stratafs", Subsystem: "gc", Name: "run_reclaimed_bytes",
			Help: "Bytes of chunks deleted by the run in progress, or by the last run."}),
	}
	reg.MustRegister(m.runs, m.expired, m.markers, m.uploads, m.orphans, m.chunks, m.bytes, m.condemned, m.pardoned, m.duration,
		m.phase, m.rows, m.swept, m.reclaimedSoFar)
	m.setPhase("idle")
	return m
}

// progress shows where the run in progress is (gc.Options.Progress).
func (m *gcMetrics) progress(p gc.Progress) {
	if m == nil {
		return
	}
	m.setPhase(p.Phase)
	m.rows.Set(float64(p.Rows))
	m.swept.Set(float64(p.Chunks))
	m.reclaimedSoFar.Set(float64(p.ReclaimedBytes))
}

func (m *gcMetrics) setPhase(phase string) {
	for _, p := range gcPhases {
		v := 0.0
		if p == phase {
			v = 1
		}
		m.phase.WithLabelValues(p).Set(v)
	}
}

// runOutcome names how a run that ended with err went. ctx is the
// collector's: a run it ended was canceled by shutdown, not failed.
func runOutcome(ctx context.Context, err error) string {
	switch {
	case errors.Is(err, meta.ErrLeaseHeld):
		return "skipped"
	case err != nil && ctx.Err() != nil:
		return "canceled"
	case err != nil:
		return "failed"
	}
	return "completed"
}

// observe counts a run and what it did: a run that failed or was
// canceled did part of its work, which counts too.
func (m *gcMetrics) observe(outcome string, st *gc.Stats) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(outcome).Inc()
	if outcome == "skipped" {
		return
	}
	m.expired.WithLabelValues("current").Add(float64(st.CurrentExpired))
	m.expired.WithLabelValues("noncurrent").Add(float64(st.NoncurrentExpired))
	m.markers.Add(float64(st.MarkersRemoved))
	m.uploads.Add(float64(st.UploadsAborted))
	m.orphans.Add(float64(st.OrphanRecords))
	m.chunks.Add(float64(st.Reclaimed))
	m.bytes.Add(float64(st.ReclaimedBytes))
	m.condemned.Add(float64(st.Condemned))
	m.pardoned.Add(float64(st.Pardoned))
	m.duration.Set(st.Elapsed.Seconds())
	m.setPhase("idle")
	m.rows.Set(float64(st.Rows))
	m.swept.Set(float64(st.Chunks))
	m.reclaimedSoFar.Set(float64(st.ReclaimedBytes))
}

// credentialSource says where the root key came from.
type credentialSource int

const (
	credsFromEnv credentialSource = iota
	credsFromFile
	credsCreated
)

// rootCredentials takes the root key from STRATAFS_ACCESS_KEY and
// STRATAFS_SECRET_KEY, else from DATA_DIR/credentials, which is created
// on first start.
func rootCredentials(dir string) (s3.Credentials, credentialSource, error) {
	c := s3.Credentials{AccessKey: envOr("STRATAFS_ACCESS_KEY", ""), SecretKey: envOr("STRATAFS_SECRET_KEY", "")}
	switch {
	case c.AccessKey != "" && c.SecretKey != "":
		return c, credsFromEnv, nil
	case c.AccessKey != "" || c.SecretKey != "":
		return c, credsFromEnv, fmt.Errorf("set both STRATAFS_ACCESS_KEY and STRATAFS_SECRET_KEY, or neither: %w", errUsage)
	}
	c, isNew, err := s3.LoadOrCreateCredentials(filepath.Join(dir, "credentials"))
	if isNew {
		return c, credsCreated, err
	}
	return c, credsFromFile, err
}

// printUsage tells how to reach the endpoint with the aws CLI. A secret
// is printed only when it was just generated, so that it is seen once.
func printUsage(w io.Writer, endpoint, region, dir string, c s3.Credentials, source credentialSource) {
	file := filepath.Join(dir, "credentials")
	fmt.Fprintf(w, "stratafs: serving S3 on %s (region %s), data in %s\n", endpoint, region, dir)
	switch source {
	case credsCreated:
		fmt.Fprintf(w, "stratafs: created root credentials, saved in %s:\n", file)
		fmt.Fprintf(w, "  export AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s AWS_REGION=%s\n", c.AccessKey, c.SecretKey, region)
	case credsFromFile:
		fmt.Fprintf(w, "stratafs: root credentials (access key %s) in %s:\n", c.AccessKey, file)
		fmt.Fprintf(w, "  export AWS_SHARED_CREDENTIALS_FILE=%s AWS_PROFILE=%s AWS_REGION=%s\n", file, s3.CredentialsProfile, region)
	case credsFromEnv:
		fmt.Fprintf(w, "stratafs: root credentials from STRATAFS_ACCESS_KEY (%s) and STRATAFS_SECRET_KEY:\n", c.AccessKey)
		fmt.Fprintf(w, "  export AWS_ACCESS_KEY_ID=$STRATAFS_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$STRATAFS_SECRET_KEY AWS_REGION=%s\n", region)
	}
	fmt.Fprintf(w, "  aws --endpoint-url %s s3 ls\n", endpoint)
}

// displayAddr is the listening address as a client would dial it.
func displayAddr(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, strings.ToLower(p))
		}
	}
	return out
}
