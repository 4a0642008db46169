package s3

import (
	"net/http"
	"strings"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// preconditions are the If-* headers of a GET or HEAD, or the
// x-amz-copy-source-if-* headers of a copy.
type preconditions struct {
	ifMatch, ifNoneMatch               string
	ifModifiedSince, ifUnmodifiedSince time.Time // zero when absent or unparsable
}

// readPreconditions reads the If-* headers behind prefix ("" or
// "X-Amz-Copy-Source-").
func readPreconditions(h http.Header, prefix string) preconditions {
	date := func(name string) time.Time {
		v := h.Get(prefix + name)
		if v == "" { // most requests: spare the three failed parses
			return time.Time{}
		}
		t, _ := http.ParseTime(v)
		return t
	}
	return preconditions{
		ifMatch:           h.Get(prefix + "If-Match"),
		ifNoneMatch:       h.Get(prefix + "If-None-Match"),
		ifModifiedSince:   date("If-Modified-Since"),
		ifUnmodifiedSince: date("If-Unmodified-Since"),
	}
}

// evaluate applies the preconditions to v in RFC 9110's order, which is
// also S3's: If-Match decides over If-Unmodified-Since, If-None-Match over
// If-Modified-Since. It returns 0 when the request may proceed, else
// http.StatusPreconditionFailed or http.StatusNotModified.
func (p preconditions) evaluate(v *meta.Version) int {
	// HTTP dates have whole seconds.
	modified := v.LastModified().Truncate(time.Second)
	switch {
	case p.ifMatch != "" && !etagMatches(p.ifMatch, v.ETag):
		return http.StatusPreconditionFailed
	case p.ifMatch == "" && !p.ifUnmodifiedSince.IsZero() && modified.After(p.ifUnmodifiedSince):
		return http.StatusPreconditionFailed
	case p.ifNoneMatch != "" && etagMatches(p.ifNoneMatch, v.ETag):
		return http.StatusNotModified
	case p.ifNoneMatch == "" && !p.ifModifiedSince.IsZero() && !modified.After(p.ifModifiedSince):
		return http.StatusNotModified
	}
	return 0
}

// etagMatches reports whether a comma-separated list of entity tags (or
// "*") names etag. Weak tags compare by their opaque part.
func etagMatches(list, etag string) bool {
	for _, t := range strings.Split(list, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.Trim(strings.TrimPrefix(t, "W/"), `"`) == etag {
			return true
		}
	}
	return false
}

// writeCondition turns the If-None-Match: * and If-Match headers of a
// write into a check the core runs atomically against the key's current
// head when it commits, so two racing conditional writers cannot both
// win. It is nil when the write is unconditional.
func writeCondition(h http.Header) (func(head *meta.Version) error, error) {
	noneMatch, match := h.Get("If-None-Match"), h.Get("If-Match")
	if noneMatch == "" && match == "" {
		return nil, nil
	}
	if noneMatch != "" && noneMatch != "*" {
		return nil, errNotImplemented.with("If-None-Match on a write supports only *.")
	}
	return func(head *meta.Version) error {
		live := head != nil && !head.DeleteMarker
		switch {
		case noneMatch != "" && live:
			return errPreconditionFailed
		case match != "" && !live:
			return errNoSuchKey
		case match != "" && !etagMatches(match, head.ETag):
			return errPreconditionFailed
		}
		return nil
	}, nil
}
