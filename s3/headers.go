package s3

import (
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// maxUserMeta is S3's limit on x-amz-meta-*: the bytes of every name
// (without the prefix) and value, summed.
const maxUserMeta = 2 << 10

const metaPrefix = "x-amz-meta-"

// unsupportedWriteHeaders ask for features a PUT or copy does not
// implement; silently ignoring them would store an object the client
// believes is encrypted, locked, tagged or shared.
var unsupportedWriteHeaders = []string{
	"X-Amz-Server-Side-Encryption", "X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id",
	"X-Amz-Server-Side-Encryption-Context", "X-Amz-Server-Side-Encryption-Bucket-Key-Enabled",
	"X-Amz-Server-Side-Encryption-Customer-Algorithm", "X-Amz-Server-Side-Encryption-Customer-Key",
	"X-Amz-Copy-Source-Server-Side-Encryption-Customer-Algorithm",
	"X-Amz-Tagging", "X-Amz-Tagging-Directive", "X-Amz-Object-Lock-Mode",
	"X-Amz-Object-Lock-Retain-Until-Date", "X-Amz-Object-Lock-Legal-Hold",
	"X-Amz-Website-Redirect-Location", "X-Amz-Write-Offset-Bytes",
	"X-Amz-Grant-Full-Control", "X-Amz-Grant-Read", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write-Acp",
}

// rejectHeaders answers NotImplemented when any of the named headers is
// present.
func rejectHeaders(h http.Header, names ...string) error {
	for _, n := range names {
		if _, ok := h[n]; ok {
			return errNotImplemented.with("The %s header is not implemented.", strings.ToLower(n))
		}
	}
	return nil
}

// checkACL accepts the canned ACLs that grant nothing beyond the owner,
// which is all stratafs does; any other is NotImplemented.
func checkACL(h http.Header) error {
	switch acl := h.Get("X-Amz-Acl"); acl {
	case "", "private", "bucket-owner-full-control":
		return nil
	default:
		return errNotImplemented.with("The canned ACL %q is not implemented; objects are private to their owner.", acl)
	}
}

// storageClasses are the classes S3 defines. stratafs stores them and
// shows them back; every class is served alike.
var storageClasses = []string{"STANDARD", "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA",
	"INTELLIGENT_TIERING", "GLACIER", "DEEP_ARCHIVE", "OUTPOSTS", "GLACIER_IR", "SNOW", "EXPRESS_ONEZONE"}

// requestAttrs reads the metadata a PUT or a REPLACE copy gives a new
// version: the standard content headers, x-amz-meta-* and the storage
// class. Nothing else of the request is stored.
func requestAttrs(q *request) (object.Attrs, error) {
	h := q.r.Header
	a := object.Attrs{
		Content: meta.Content{
			Type:         h.Get("Content-Type"),
			Encoding:     contentEncoding(h),
			Disposition:  h.Get("Content-Disposition"),
			Language:     h.Get("Content-Language"),
			CacheControl: h.Get("Cache-Control"),
			Expires:      h.Get("Expires"),
		},
		Owner: q.owner,
	}
	if sc := h.Get("X-Amz-Storage-Class"); sc != "" {
		if !slices.Contains(storageClasses, sc) {
			return a, errInvalidStorageClass
		}
		if sc != "STANDARD" {
			a.StorageClass = sc
		}
	}
	size := 0
	for k, vs := range h {
		name, ok := strings.CutPrefix(strings.ToLower(k), metaPrefix)
		if !ok {
			continue
		}
		if name == "" {
			return a, errInvalidArgument.with("A metadata header needs a name after %s.", metaPrefix)
		}
		if a.UserMeta == nil {
			a.UserMeta = make(map[string]string)
		}
		v := strings.Join(vs, ",")
		a.UserMeta[name] = v
		size += len(name) + len(v)
	}
	if size > maxUserMeta {
		return a, errMetadataTooLarge.with("Your metadata headers are %d bytes, over the limit of %d.", size, maxUserMeta)
	}
	return a, nil
}

// contentEncoding is the Content-Encoding to store: the client's, without
// aws-chunked, which describes the request framing and not the object.
func contentEncoding(h http.Header) string {
	var keep []string
	for _, e := range strings.Split(h.Get("Content-Encoding"), ",") {
		if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
			keep = append(keep, e)
		}
	}
	return strings.Join(keep, ",")
}

// setVersionHeaders sets what a GET or HEAD shows of a version: ETag,
// Last-Modified, the stored content headers, x-amz-meta-* and the storage
// class.
func setVersionHeaders(h http.Header, v *meta.Version) {
	h.Set("ETag", `"`+v.ETag+`"`)
	h.Set("Last-Modified", v.LastModified().Format(http.TimeFormat))
	ct := v.Content.Type
	if ct == "" {
		ct = "binary/octet-stream"
	}
	h.Set("Content-Type", ct)
	for name, val := range map[string]string{
		"Content-Encoding": v.Content.Encoding, "Content-Disposition": v.Content.Disposition,
		"Content-Language": v.Content.Language, "Cache-Control": v.Content.CacheControl,
		"Expires": v.Content.Expires,
	} {
		if val != "" {
			h.Set(name, val)
		}
	}
	missing := 0
	for name, val := range v.UserMeta {
		if !validToken(name) {
			missing++
			continue
		}
		// Written as is (lowercase), as S3 sends them. Values that are not
		// printable ASCII go out RFC 2047-encoded, as S3 does.
		h[metaPrefix+name] = []string{asciiHeaderValue(val)}
	}
	if missing > 0 {
		h.Set("x-amz-missing-meta", strconv.Itoa(missing))
	}
	if v.StorageClass != "" {
		h.Set("x-amz-storage-class", v.StorageClass)
	}
}

// applyOverrides applies GET's response-* query parameters.
func applyOverrides(h http.Header, q *request) {
	for _, p := range responseParams {
		if v := q.query.Get(p); v != "" {
			h.Set(strings.TrimPrefix(p, "response-"), v)
		}
	}
}

// validToken reports whether s can be an HTTP header name.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func asciiHeaderValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c >= 0x7f {
			return mime.BEncoding.Encode("UTF-8", v)
		}
	}
	return v
}
