package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/stratafs/stratafs/gc"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// The lifecycle API over S3, and the collector applying what it set.

func (c s3Test) putLifecycle(bucket string, rules ...s3types.LifecycleRule) error {
	_, err := c.c.PutBucketLifecycleConfiguration(c.ctx, &awss3.PutBucketLifecycleConfigurationInput{
		Bucket:                 &bucket,
		LifecycleConfiguration: &s3types.BucketLifecycleConfiguration{Rules: rules},
	})
	return err
}

func (c s3Test) getLifecycle(bucket string) ([]s3types.LifecycleRule, error) {
	out, err := c.c.GetBucketLifecycleConfiguration(c.ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: &bucket})
	if err != nil {
		return nil, err
	}
	return out.Rules, nil
}

// mustJSON renders v for comparison: rules as the SDK decoded them, or as
// the core holds them.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// storedRules renders the rules the core holds for bucket.
func (s *s3Server) storedRules(t *testing.T, bucket string) string {
	t.Helper()
	b, err := s.svc.Bucket(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return mustJSON(t, b.Lifecycle)
}

func TestS3Lifecycle(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	alice := s3Test{t: t, ctx: c.ctx, c: s.client(true, func(o *awss3.Options) {
		o.Credentials = credentials.NewStaticCredentialsProvider(s3AliceKey, s3AliceSecret, "")
	})}
	defer recoverMust(t)
	c.createBucket("life")

	_, err := c.getLifecycle("life")
	wantErr(t, err, 404, "NoSuchLifecycleConfiguration")

	rules := []s3types.LifecycleRule{
		{
			ID:         aws.String("logs"),
			Status:     s3types.ExpirationStatusEnabled,
			Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(30)},
			NoncurrentVersionExpiration: &s3types.NoncurrentVersionExpiration{
				NoncurrentDays: aws.Int32(7), NewerNoncurrentVersions: aws.Int32(3),
			},
			AbortIncompleteMultipartUpload: &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(2)},
		},
		{
			ID:         aws.String("markers"),
			Status:     s3types.ExpirationStatusDisabled,
			Filter:     &s3types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &s3types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
		},
	}
	noErr(t, c.putLifecycle("life", rules...))
	eq(t, "rules read back", mustJSON(t, must(c.getLifecycle("life"))), mustJSON(t, rules))
	eq(t, "rules in the core", s.storedRules(t, "life"), mustJSON(t, []meta.LifecycleRule{
		{ID: "logs", Prefix: "logs/", Enabled: true, ExpirationDays: 30, NoncurrentDays: 7, NewerNoncurrentVersions: 3, AbortIncompleteUploadDays: 2},
		{ID: "markers", ExpiredObjectDeleteMarker: true},
	}))

	// The legacy filter and And both read back as Filter/Prefix; a rule
	// without an ID gets one. The deprecated Prefix is the legacy form
	// under test: old clients still send it.
	noErr(t, c.putLifecycle("life",
		//lint:ignore SA1019 the legacy rule-level Prefix is what this case sends
		s3types.LifecycleRule{ID: aws.String("legacy"), Status: s3types.ExpirationStatusEnabled, Prefix: aws.String("old/"),
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(1)}},
		s3types.LifecycleRule{Status: s3types.ExpirationStatusEnabled,
			Filter:                         &s3types.LifecycleRuleFilter{And: &s3types.LifecycleRuleAndOperator{Prefix: aws.String("tmp/")}},
			AbortIncompleteMultipartUpload: &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}},
	))
	got := must(c.getLifecycle("life"))
	if len(got) != 2 || aws.ToString(got[1].ID) == "" {
		t.Fatalf("rules read back: %s", mustJSON(t, got))
	}
	got[1].ID = nil
	eq(t, "normalized rules", mustJSON(t, got), mustJSON(t, []s3types.LifecycleRule{
		{ID: aws.String("legacy"), Status: s3types.ExpirationStatusEnabled, Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String("old/")},
			Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(1)}},
		{Status: s3types.ExpirationStatusEnabled, Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
			AbortIncompleteMultipartUpload: &s3types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)}},
	}))

	// Only the bucket's owner (or the root) sees or changes its rules.
	before := s.storedRules(t, "life")
	_, err = alice.getLifecycle("life")
	wantErr(t, err, 403, "AccessDenied")
	wantErr(t, alice.putLifecycle("life", rules...), 403, "AccessDenied")
	_, err = alice.c.DeleteBucketLifecycle(c.ctx, &awss3.DeleteBucketLifecycleInput{Bucket: aws.String("life")})
	wantErr(t, err, 403, "AccessDenied")
	eq(t, "rules after refused requests", s.storedRules(t, "life"), before)
	wantErr(t, c.putLifecycle("nosuchbucket", rules...), 404, "NoSuchBucket")

	resp := s.send(t, s.build(t, rawRequest{method: "DELETE", path: "/life?lifecycle"}))
	eq(t, "DeleteBucketLifecycle status", resp.status, 204)
	_, err = c.getLifecycle("life")
	wantErr(t, err, 404, "NoSuchLifecycleConfiguration")
	eq(t, "rules in the core after delete", s.storedRules(t, "life"), "null")
	must(c.c.DeleteBucketLifecycle(c.ctx, &awss3.DeleteBucketLifecycleInput{Bucket: aws.String("life")}))
}

// TestS3Expiration checks x-amz-expiration on the responses that write
// or read an object an Expiration rule covers: the first midnight UTC at
// least Days after it was written, and the rule due first.
func TestS3Expiration(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("exp")
	days := func(id, prefix string, n int32) s3types.LifecycleRule {
		return s3types.LifecycleRule{ID: aws.String(id), Status: s3types.ExpirationStatusEnabled,
			Filter: &s3types.LifecycleRuleFilter{Prefix: aws.String(prefix)}, Expiration: &s3types.LifecycleExpiration{Days: aws.Int32(n)}}
	}
	off := days("off", "", 1)
	off.Status = s3types.ExpirationStatusDisabled
	noErr(t, c.putLifecycle("exp", days("logs", "logs/", 30), days("tmp", "logs/tmp/", 2), off))
	want := func(written time.Time, n int, rule string) string {
		d := written.UTC().AddDate(0, 0, n+1)
		return fmt.Sprintf(`expiry-date="%s", rule-id="%s"`,
			time.Date(d.Year(), d.Month(), d.Day(), 0, 0, 0, 0, time.UTC).Format(http.TimeFormat), rule)
	}
	for key, rule := range map[string]string{"logs/a": "logs", "logs/tmp/b": "tmp", "other": ""} {
		put := c.put("exp", key, []byte("x"))
		head := must(c.c.HeadObject(c.ctx, &awss3.HeadObjectInput{Bucket: aws.String("exp"), Key: aws.String(key)}))
		get, _ := c.get("exp", key, "")
		expected := ""
		if rule != "" {
			expected = want(aws.ToTime(head.LastModified), map[string]int{"logs": 30, "tmp": 2}[rule], rule)
		}
		eq(t, key+" PUT x-amz-expiration", aws.ToString(put.Expiration), expected)
		eq(t, key+" HEAD x-amz-expiration", aws.ToString(head.Expiration), expected)
		eq(t, key+" GET x-amz-expiration", aws.ToString(get.Expiration), expected)
	}
}

// TestS3LifecycleBadConfigurations sends configurations S3 refuses, and
// those stratafs cannot apply: each gets its error and changes nothing.
func TestS3LifecycleBadConfigurations(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("life")
	noErr(t, c.putLifecycle("life", s3types.LifecycleRule{ID: aws.String("keep"), Status: s3types.ExpirationStatusEnabled,
		Filter: &s3types.LifecycleRuleFilter{}, NoncurrentVersionExpiration: &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}}))
	before := s.storedRules(t, "life")

	rule := func(id, body string) string {
		return "<Rule><ID>" + id + "</ID><Status>Enabled</Status>" + body + "</Rule>"
	}
	doc := func(rules ...string) string {
		return `<?xml version="1.0" encoding="UTF-8"?><LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` +
			strings.Join(rules, "") + "</LifecycleConfiguration>"
	}
	filter := "<Filter><Prefix>a/</Prefix></Filter>"
	days := "<Expiration><Days>1</Days></Expiration>"
	tests := []struct {
		name, body string
		status     int
		code       string
	}{
		{"not XML", "rules", 400, "MalformedXML"},
		{"unclosed", doc(rule("r", filter+days))[:60], 400, "MalformedXML"},
		{"no rules", doc(), 400, "MalformedXML"},
		{"bad status", doc("<Rule><ID>r</ID><Status>enabled</Status>" + filter + days + "</Rule>"), 400, "MalformedXML"},
		{"Filter and Prefix", doc(rule("r", filter+"<Prefix>a/</Prefix>"+days)), 400, "MalformedXML"},
		{"Days and ExpiredObjectDeleteMarker", doc(rule("r", filter+
			"<Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration>")), 400, "MalformedXML"},
		{"unknown action", doc(rule("r", filter+days+"<Compress/>")), 400, "MalformedXML"},
		{"zero Days", doc(rule("r", filter+"<Expiration><Days>0</Days></Expiration>")), 400, "InvalidArgument"},
		{"negative NoncurrentDays", doc(rule("r", filter+
			"<NoncurrentVersionExpiration><NoncurrentDays>-2</NoncurrentDays></NoncurrentVersionExpiration>")), 400, "InvalidArgument"},
		{"NewerNoncurrentVersions above 100", doc(rule("r", filter+
			"<NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>101</NewerNoncurrentVersions></NoncurrentVersionExpiration>")),
			400, "InvalidArgument"},
		{"no action", doc(rule("r", filter)), 400, "InvalidArgument"},
		{"ID used twice", doc(rule("r", filter+days), rule("r", days+"<Filter/>")), 400, "InvalidArgument"},
		{"ID too long", doc(rule(strings.Repeat("i", 256), filter+days)), 400, "InvalidArgument"},
		{"Expiration Date", doc(rule("r", filter+"<Expiration><Date>2030-01-01T00:00:00.000Z</Date></Expiration>")), 501, "NotImplemented"},
		{"Transition", doc(rule("r", filter+"<Transition><Days>30</Days><StorageClass>GLACIER</StorageClass></Transition>")), 501, "NotImplemented"},
		{"NoncurrentVersionTransition", doc(rule("r", filter+days+
			"<NoncurrentVersionTransition><NoncurrentDays>1</NoncurrentDays><StorageClass>GLACIER</StorageClass></NoncurrentVersionTransition>")),
			501, "NotImplemented"},
		{"tag filter", doc(rule("r", "<Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter>"+days)), 501, "NotImplemented"},
		{"tags in And", doc(rule("r", "<Filter><And><Prefix>a/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter>"+days)), 501, "NotImplemented"},
		{"size filter", doc(rule("r", "<Filter><ObjectSizeLessThan>1024</ObjectSizeLessThan></Filter>"+days)), 501, "NotImplemented"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkError(t, s.send(t, s.build(t, rawRequest{method: "PUT", path: "/life?lifecycle", body: []byte(tt.body)})), tt.status, tt.code)
			eq(t, "rules", s.storedRules(t, "life"), before)
		})
	}
	t.Run("wrong Content-MD5", func(t *testing.T) {
		body := []byte(doc(rule("r", filter+days)))
		checkError(t, s.send(t, s.build(t, rawRequest{method: "PUT", path: "/life?lifecycle", body: body,
			header: map[string]string{"Content-MD5": b64MD5([]byte("other"))}})), 400, "BadDigest")
		eq(t, "rules", s.storedRules(t, "life"), before)
	})
}

// TestS3LifecycleCollected sets rules over S3 and runs the collector on
// the server's stores with a clock of the test's: it expires exactly the
// noncurrent versions due, and the delete marker left alone, and the
// remaining versions read back whole.
func TestS3LifecycleCollected(t *testing.T) {
	s := startS3(t, false)
	c := s3Test{t: t, ctx: context.Background(), c: s.client(true)}
	defer recoverMust(t)
	c.createBucket("life")
	c.versioning("life", s3types.BucketVersioningStatusEnabled)

	// Bodies span chunks, so that what expires has chunks to reclaim.
	const size = s3Chunk + 1000
	start := time.Now()
	var ids []string // logs/a's versions, oldest first
	for i := range 4 {
		ids = append(ids, *c.put("life", "logs/a", randomBytes(size, byte(i))).VersionId)
	}
	b1 := *c.put("life", "logs/b", randomBytes(size, 10)).VersionId
	c.del("life", "logs/b", "")
	d1 := *c.put("life", "logs/d", randomBytes(size, 20)).VersionId
	c.del("life", "logs/d", "")
	c.del("life", "logs/d", d1) // logs/d: a delete marker alone
	for i := range 2 {
		c.put("life", "data/c", randomBytes(size, byte(30+i)))
	}
	end := time.Now()

	noErr(t, c.putLifecycle("life",
		s3types.LifecycleRule{ID: aws.String("logs"), Status: s3types.ExpirationStatusEnabled,
			Filter:                      &s3types.LifecycleRuleFilter{Prefix: aws.String("logs/")},
			Expiration:                  &s3types.LifecycleExpiration{ExpiredObjectDeleteMarker: aws.Bool(true)},
			NoncurrentVersionExpiration: &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1), NewerNoncurrentVersions: aws.Int32(1)}},
		s3types.LifecycleRule{ID: aws.String("off"), Status: s3types.ExpirationStatusDisabled,
			Filter:                      &s3types.LifecycleRuleFilter{Prefix: aws.String("data/")},
			NoncurrentVersionExpiration: &s3types.NoncurrentVersionExpiration{NoncurrentDays: aws.Int32(1)}},
	))
	rows := c.versions("life", 1000)
	var logsD []string
	for _, r := range rows {
		if strings.HasPrefix(r, "logs/d@") {
			logsD = append(logsD, r)
		}
	}
	if len(logsD) != 1 {
		t.Fatalf("logs/d: %q", logsD)
	}

	// collect runs the collector as of instant at, over the server's
	// stores, deleting unreferenced chunks whatever their age.
	collect := func(at time.Time) *gc.Stats {
		t.Helper()
		svc := object.New(s.svc.Meta(), s.svc.Data(), object.Options{ChunkSize: s3Chunk, Now: func() time.Time { return at }})
		return must(gc.Run(c.ctx, svc, gc.Options{Grace: time.Nanosecond}))
	}

	// A day after the writes, not yet at the next midnight UTC: no
	// noncurrent version is due, the lone marker goes at once.
	st := collect(object.DueAt(start, 1).Add(-time.Second))
	eq(t, "noncurrent expired early", st.NoncurrentExpired, int64(0))
	eq(t, "markers removed", st.MarkersRemoved, int64(1))
	want := slices.DeleteFunc(slices.Clone(rows), func(r string) bool { return r == logsD[0] })
	eq(t, "versions after the first run", strings.Join(c.versions("life", 1000), " "), strings.Join(want, " "))

	// Once due: logs/a keeps its current and newest noncurrent version,
	// logs/b its only noncurrent one (and so its marker), data/c all.
	st = collect(object.DueAt(end, 1))
	eq(t, "noncurrent expired", st.NoncurrentExpired, int64(2))
	eq(t, "current expired", st.CurrentExpired, int64(0))
	eq(t, "markers removed when due", st.MarkersRemoved, int64(0))
	// Their chunks are condemned, and deleted by a run the grace period
	// (here 1 ns) later.
	eq(t, "bytes reclaimed", collect(object.DueAt(end, 1).Add(time.Second)).ReclaimedBytes, int64(2*size))
	want = slices.DeleteFunc(want, func(r string) bool {
		return strings.HasPrefix(r, "logs/a@"+ids[0]) || strings.HasPrefix(r, "logs/a@"+ids[1])
	})
	eq(t, "versions after the second run", strings.Join(c.versions("life", 1000), " "), strings.Join(want, " "))
	for i, id := range ids[2:] {
		_, body := c.get("life", "logs/a", id)
		eq(t, "logs/a version read back", md5hex(body), md5hex(randomBytes(size, byte(2+i))))
	}
	_, body := c.get("life", "logs/b", b1)
	eq(t, "logs/b version read back", md5hex(body), md5hex(randomBytes(size, 10)))
	for _, id := range ids[:2] {
		wantErr(t, c.getErr("life", "logs/a", id), 404, "NoSuchVersion")
	}
}
