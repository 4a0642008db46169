package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/data/local"
	"github.com/stratafs/stratafs/meta/kv/bolt"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// The S3 figures drive the S3 endpoint, served in this process on a
// loopback port over the embedded default stores (bolt and local chunks)
// under scratch, with the AWS SDK for Go v2 at its default settings:
// 4 KiB objects and 64 MiB objects, PUT then GET, by 1 and 16 concurrent
// clients. Beside each figure, the same bytes written to plain files on
// the same disk (each fsynced, as a PUT is durable when it is answered)
// and read back by as many threads: the disk's own speed. GETs and file
// reads alike come from the page cache.

// s3Figures prints the S3 figures; scratch is on the disk measured.
func s3Figures(w *tabwriter.Writer, scratch string) {
	dir := filepath.Join(scratch, "s3")
	check(os.MkdirAll(filepath.Join(dir, "files"), 0o755))
	ms, err := bolt.Open(filepath.Join(dir, "meta.db"))
	check(err)
	defer ms.Close()
	ds, err := local.Open(dir)
	check(err)
	defer ds.Close()
	creds := s3.NewCredentials()
	h := s3.New(object.New(ms, ds, object.Options{}), s3.Config{
		Keys:          sigv4.StaticKeys{creds.AccessKey: creds.SecretKey},
		RootAccessKey: creds.AccessKey,
		Logger:        slog.New(slog.DiscardHandler),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(err)
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()
	c := awss3.New(awss3.Options{
		Region:                     "us-east-1",
		Credentials:                credentials.NewStaticCredentialsProvider(creds.AccessKey, creds.SecretKey, ""),
		BaseEndpoint:               aws.String("http://" + ln.Addr().String()),
		UsePathStyle:               true,
		HTTPClient:                 &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	})
	ctx := context.Background()
	bucket := aws.String("bench")
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bucket})
	check(err)

	type workload struct {
		name string
		size int
		// objects is how many each run moves, per client count.
		objects map[int]int
		unit    string
		per     float64 // unit per object
	}
	bigSize, smallN, bigN := 64<<20, 2000, map[int]int{1: 4, 16: 32}
	if *quick {
		bigSize, smallN, bigN = 16<<20, 320, map[int]int{1: 2, 16: 16}
	}
	loads := []workload{
		{"4 KiB", 4 << 10, map[int]int{1: smallN, 16: smallN}, "obj/s", 1},
		{fmt.Sprintf("%d MiB", bigSize>>20), bigSize, bigN, "MiB/s", float64(bigSize) / (1 << 20)},
	}
	for _, l := range loads {
		payload := make([]byte, l.size)
		_, err := rand.Read(payload)
		check(err)
		for _, clients := range []int{1, 16} {
			n := l.objects[clients]
			key := func(i int) *string { return aws.String(fmt.Sprintf("%d/%d/%d", l.size, clients, i)) }
			file := func(i int) string {
				return filepath.Join(dir, "files", fmt.Sprintf("%d-%d-%d", l.size, clients, i))
			}
			row := func(side, op string, v float64) float64 {
				fmt.Fprintf(w, "%s\t%s %s, %d client(s)\t%.0f\t%s\t\n", side, l.name, op, clients, v*l.per, l.unit)
				return v
			}
			put := row("s3", "PUT", rate(n, clients, func(i int) {
				_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bucket, Key: key(i), Body: bytes.NewReader(payload)})
				check(err)
			}))
			write := row("file", "write+fsync", rate(n, clients, func(i int) { writeSynced(file(i), payload) }))
			get := row("s3", "GET", rate(n, clients, func(i int) {
				out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bucket, Key: key(i)})
				check(err)
				_, err = io.Copy(io.Discard, out.Body)
				check(err)
				check(out.Body.Close())
			}))
			read := row("file", "read", rate(n, clients, func(i int) {
				_, err := os.ReadFile(file(i))
				check(err)
			}))
			fmt.Fprintf(w, "s3\t%s PUT ÷ file write, %d client(s)\t%.2f\t×\t\n", l.name, clients, put/write)
			fmt.Fprintf(w, "s3\t%s GET ÷ file read, %d client(s)\t%.2f\t×\t\n", l.name, clients, get/read)
		}
	}
}

// writeSynced writes b to a new file at p and fsyncs it.
func writeSynced(p string, b []byte) {
	f, err := os.Create(p)
	check(err)
	_, err = f.Write(b)
	check(err)
	check(f.Sync())
	check(f.Close())
}
