package sigv4

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// emptySHA256 is the hex SHA-256 of no bytes.
const emptySHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// canonicalPaths returns the forms of the request path a client may have
// signed. S3 signs paths without normalization, so keys such as "a//b" or
// "./x" sign as themselves; SigV4 prescribes the strict URI-encoding of
// the decoded path, but some clients sign the path exactly as they sent
// it, which may leave characters such as '!' or '=' unescaped. Both forms
// decode to the same path, so accepting either grants nothing more.
func canonicalPaths(r *http.Request) []string {
	strict := URIEncode(r.URL.Path, false)
	if strict == "" {
		return []string{"/"}
	}
	if raw := r.URL.EscapedPath(); raw != strict {
		return []string{strict, raw}
	}
	return []string{strict}
}

// canonicalRequest rebuilds the string the client signed, from the request
// as received and the headers it says it signed.
func canonicalRequest(r *http.Request, path string, signed []string, query, payloadHash string) string {
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(path)
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for _, name := range signed {
		b.WriteString(name)
		b.WriteByte(':')
		b.WriteString(headerValue(r, name))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(signed, ";"))
	b.WriteByte('\n')
	b.WriteString(payloadHash)
	return b.String()
}

// headerValue is a header's canonical value: its values trimmed, runs of
// spaces collapsed, joined by commas. net/http moves Host out of the
// header map, and may do the same with Content-Length.
func headerValue(r *http.Request, name string) string {
	switch name {
	case "host":
		return r.Host
	case "content-length":
		if r.Header.Get("Content-Length") == "" && r.ContentLength >= 0 {
			return strconv.FormatInt(r.ContentLength, 10)
		}
	}
	vs := r.Header.Values(name)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strings.Join(strings.Fields(v), " ")
	}
	return strings.Join(out, ",")
}

// queryParam is one decoded query parameter, in the order sent.
type queryParam struct{ key, value string }

// parseQuery decodes a raw query string strictly: a parameter that does
// not unescape is an error rather than silently dropped, so what is
// verified is what the handlers see.
func parseQuery(raw string) ([]queryParam, error) {
	var ps []queryParam
	for _, part := range strings.Split(raw, "&") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("query parameter %q: %w", k, err)
		}
		value, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("query parameter %q: %w", k, err)
		}
		ps = append(ps, queryParam{key, value})
	}
	return ps, nil
}

// canonicalQuery encodes the parameters, minus the one named skip (the
// signature of a presigned URL), sorted by encoded key and then value.
func canonicalQuery(ps []queryParam, skip string) string {
	enc := make([]queryParam, 0, len(ps))
	for _, p := range ps {
		if p.key != skip {
			enc = append(enc, queryParam{URIEncode(p.key, true), URIEncode(p.value, true)})
		}
	}
	slices.SortFunc(enc, func(a, b queryParam) int {
		return cmp.Or(strings.Compare(a.key, b.key), strings.Compare(a.value, b.value))
	})
	var b strings.Builder
	for i, p := range enc {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.key)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String()
}

// URIEncode percent-encodes every byte except the unreserved characters
// (and '/', unless encodeSlash), with uppercase hex: SigV4's encoding,
// which S3 also uses for encoding-type=url listings.
func URIEncode(s string, encodeSlash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '.' || c == '~' || c == '/' && !encodeSlash {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// stringToSign is the string whose HMAC is a signature. kind is the
// algorithm line: Algorithm for requests, or the chunk and trailer
// variants of aws-chunked bodies.
func stringToSign(kind, amzDate, scope string, lines ...string) string {
	return kind + "\n" + amzDate + "\n" + scope + "\n" + strings.Join(lines, "\n")
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// signingKey derives the key of one day, region and service from a secret.
func signingKey(secret string, c credential) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), c.date)
	k = hmacSHA256(k, c.region)
	k = hmacSHA256(k, c.service)
	return hmacSHA256(k, terminator)
}

func hmacSHA256(key []byte, s string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(s))
	return m.Sum(nil)
}
