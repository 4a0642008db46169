package integration

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/stratafs/stratafs/s3"
)

// TestS3SlowDown holds GETs open, their bodies unread so that the server
// is stuck sending them, and checks that the request past each bound
// (GETs sending bodies, requests in progress) is answered 503 SlowDown
// at once, and that the place is free again once a body is closed.
func TestS3SlowDown(t *testing.T) {
	for _, tt := range []struct {
		name string
		cfg  func(*s3.Config)
		held int
		next func(c s3Test) error
	}{
		{"reads", func(c *s3.Config) { c.MaxReads = 1 }, 1, func(c s3Test) error {
			// A HEAD sends no body: it is not held back.
			must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("busy"), Key: aws.String("big")}))
			out, err := c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("busy"), Key: aws.String("big")})
			if err == nil {
				out.Body.Close()
			}
			return err
		}},
		{"requests", func(c *s3.Config) { c.MaxRequests = 2 }, 2, func(c s3Test) error {
			_, err := c.c.ListBuckets(c.ctx, &awss3.ListBucketsInput{})
			return err
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := startS3(t, false, tt.cfg)
			c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
			defer recoverMust(t)
			c.createBucket("busy")
			// Far more than the socket buffers hold, so that a sender blocks.
			c.put("busy", "big", randomBytes(24<<20, 1))
			var held []*awss3.GetObjectOutput
			defer func() { // else the server waits for them at its end
				for _, h := range held {
					h.Body.Close()
				}
			}()
			for range tt.held {
				held = append(held, must(c.c.GetObject(c.ctx, &awss3.GetObjectInput{Bucket: aws.String("busy"), Key: aws.String("big")})))
			}
			wantErr(t, tt.next(c), 503, "SlowDown")
			noErr(t, held[0].Body.Close())
			for end := time.Now().Add(time.Minute); tt.next(c) != nil; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(end) {
					t.Fatal("still refused a minute after a GET ended")
				}
			}
		})
	}
}
