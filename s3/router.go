package s3

import (
	"net/http"
	"slices"
	"strings"
)

// level is the kind of resource a request addresses.
type level int

const (
	levelService level = iota // no bucket: ListBuckets
	levelBucket
	levelObject
)

// A handler serves one S3 operation; it writes the response, or returns
// an error that becomes an S3 error response.
type handler func(h *Handler, w http.ResponseWriter, q *request) error

// An op is one routed S3 operation.
type op struct {
	level  level
	method string
	sub    string // the subresource query parameter naming it; "" for none
	name   string // the S3 operation name
	// params are the other query parameters it understands. A write
	// (PUT, POST, DELETE) with any other parameter is refused, so that a
	// feature we do not know can never be mistaken for a plain write.
	params []string
	serve  handler
}

// responseParams are the response-* overrides of GET and HEAD.
var responseParams = []string{"response-cache-control", "response-content-disposition",
	"response-content-encoding", "response-content-language", "response-content-type", "response-expires"}

var ops = []op{
	{levelService, http.MethodGet, "", "ListBuckets", []string{"prefix", "max-buckets", "continuation-token", "bucket-region"}, (*Handler).listBuckets},

	{levelBucket, http.MethodGet, "", "ListObjects", []string{"prefix", "delimiter", "marker", "max-keys", "encoding-type",
		"list-type", "continuation-token", "start-after", "fetch-owner"}, (*Handler).listObjects},
	{levelBucket, http.MethodGet, "versions", "ListObjectVersions", []string{"prefix", "delimiter", "key-marker",
		"version-id-marker", "max-keys", "encoding-type"}, (*Handler).listObjectVersions},
	{levelBucket, http.MethodGet, "location", "GetBucketLocation", nil, (*Handler).getBucketLocation},
	{levelBucket, http.MethodGet, "versioning", "GetBucketVersioning", nil, (*Handler).getBucketVersioning},
	{levelBucket, http.MethodHead, "", "HeadBucket", nil, (*Handler).headBucket},
	{levelBucket, http.MethodPut, "", "CreateBucket", nil, (*Handler).createBucket},
	{levelBucket, http.MethodPut, "versioning", "PutBucketVersioning", nil, (*Handler).putBucketVersioning},
	{levelBucket, http.MethodDelete, "", "DeleteBucket", nil, (*Handler).deleteBucket},
	{levelBucket, http.MethodPost, "delete", "DeleteObjects", nil, (*Handler).deleteObjects},
	{levelBucket, http.MethodGet, "lifecycle", "GetBucketLifecycleConfiguration", nil, (*Handler).getBucketLifecycle},
	{levelBucket, http.MethodPut, "lifecycle", "PutBucketLifecycleConfiguration", nil, (*Handler).putBucketLifecycle},
	{levelBucket, http.MethodDelete, "lifecycle", "DeleteBucketLifecycle", nil, (*Handler).deleteBucketLifecycle},
	{levelBucket, http.MethodGet, "uploads", "ListMultipartUploads", []string{"prefix", "delimiter", "key-marker",
		"upload-id-marker", "max-uploads", "encoding-type"}, (*Handler).listUploads},

	{levelObject, http.MethodGet, "", "GetObject", append([]string{"versionId", "partNumber"}, responseParams...), (*Handler).getObject},
	{levelObject, http.MethodGet, "attributes", "GetObjectAttributes", []string{"versionId"}, (*Handler).getObjectAttributes},
	{levelObject, http.MethodHead, "", "HeadObject", append([]string{"versionId", "partNumber"}, responseParams...), (*Handler).headObject},
	{levelObject, http.MethodPut, "", "PutObject", nil, (*Handler).putObject},
	{levelObject, http.MethodDelete, "", "DeleteObject", []string{"versionId"}, (*Handler).deleteObject},
	{levelObject, http.MethodPost, "uploads", "CreateMultipartUpload", nil, (*Handler).createUpload},
	{levelObject, http.MethodPut, "uploadId", "UploadPart", []string{"partNumber"}, (*Handler).uploadPart},
	{levelObject, http.MethodPost, "uploadId", "CompleteMultipartUpload", nil, (*Handler).completeUpload},
	{levelObject, http.MethodDelete, "uploadId", "AbortMultipartUpload", nil, (*Handler).abortUpload},
	{levelObject, http.MethodGet, "uploadId", "ListParts", []string{"max-parts", "part-number-marker", "encoding-type"}, (*Handler).listParts},
}

// subresources are the query parameters that select something other than
// the plain bucket or object: every one S3 defines, so that those we do
// not implement are recognized and refused. partNumber is not one: it
// selects a part of what GetObject, HeadObject and UploadPart address.
var subresources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "attributes": true, "cors": true,
	"delete": true, "encryption": true, "intelligent-tiering": true, "inventory": true,
	"legal-hold": true, "lifecycle": true, "location": true, "logging": true,
	"metadataConfiguration": true, "metadataTable": true, "metrics": true, "notification": true,
	"object-lock": true, "ownershipControls": true, "policy": true,
	"policyStatus": true, "publicAccessBlock": true, "renameObject": true, "replication": true,
	"requestPayment": true, "restore": true, "retention": true, "select": true, "session": true,
	"tagging": true, "torrent": true, "uploadId": true, "uploads": true, "versioning": true,
	"versions": true, "website": true,
}

// route finds the operation a request asks for. The op is returned even
// with an error, so its name (if known) reaches the log.
func route(q *request) (op, error) {
	lv := levelService
	switch {
	case q.key != "":
		lv = levelObject
	case q.bucket != "":
		lv = levelBucket
	}
	var subs []string
	for k := range q.query {
		if subresources[k] {
			subs = append(subs, k)
		}
	}
	sub := ""
	switch len(subs) {
	case 0:
	case 1:
		sub = subs[0]
	default:
		return op{}, errNotImplemented.with("The combination of subresources %s is not implemented.", strings.Join(subs, ", "))
	}
	for _, o := range ops {
		if o.level == lv && o.method == q.r.Method && o.sub == sub {
			return o, o.checkParams(q)
		}
	}
	switch q.r.Method {
	case http.MethodGet, http.MethodHead, http.MethodPut, http.MethodPost, http.MethodDelete:
		if sub != "" {
			return op{}, errNotImplemented.with("The %s %s subresource is not implemented.", q.r.Method, sub)
		}
		return op{}, errNotImplemented.with("%s is not implemented on this resource.", q.r.Method)
	}
	return op{}, errMethodNotAllowed
}

// checkParams refuses writes that carry query parameters o does not
// understand. Reads ignore them, as S3 does.
func (o op) checkParams(q *request) error {
	switch q.r.Method {
	case http.MethodGet, http.MethodHead:
		return nil
	}
	for k := range q.query {
		switch {
		case k == o.sub, k == "x-id", strings.HasPrefix(strings.ToLower(k), "x-amz-"):
		case !slices.Contains(o.params, k):
			return errNotImplemented.with("The query parameter %q is not implemented for %s.", k, o.name)
		}
	}
	return nil
}
