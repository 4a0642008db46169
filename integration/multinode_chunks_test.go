package integration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/stratafs/stratafs/data"
	s3data "github.com/stratafs/stratafs/data/s3"
	"github.com/stratafs/stratafs/data/storetest"
)

// TestChunksOnStratafsS3 runs the chunk-store contract over data/s3
// against the stratafs S3 endpoint, which (unlike gofakes3 in data/s3's
// own tests) checks signatures: so wrong credentials must fail Open with
// the endpoint's own error code.
func TestChunksOnStratafsS3(t *testing.T) {
	srv := startS3(t, false)
	_, port, _ := net.SplitHostPort(srv.addr)
	endpoint := "http://127.0.0.1:" + port
	defer recoverMust(t)
	s3Test{t: t, ctx: context.Background(), c: srv.client(true)}.createBucket("chunks")
	root := credentials.NewStaticCredentialsProvider(s3AccessKey, s3SecretKey, "")

	var cases atomic.Int32
	storetest.Run(t, func(t *testing.T) data.Store {
		s, err := s3data.Open(context.Background(), s3data.Options{
			Bucket: "chunks", Prefix: fmt.Sprintf("case%d", cases.Add(1)), Endpoint: endpoint, Credentials: root,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})

	for _, bad := range []struct{ key, secret, code string }{
		{s3AccessKey, "not-the-secret", "SignatureDoesNotMatch"},
		{"SFNOSUCHKEY000000001", s3SecretKey, "InvalidAccessKeyId"},
	} {
		_, err := s3data.Open(context.Background(), s3data.Options{
			Bucket: "chunks", Endpoint: endpoint, MaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(bad.key, bad.secret, ""),
		})
		if err == nil || !strings.Contains(err.Error(), bad.code) || !strings.Contains(err.Error(), "chunk store s3://chunks/") {
			t.Errorf("Open with key %s and a wrong secret or key: %v; want %s naming the store", bad.key, err, bad.code)
		}
	}
}
