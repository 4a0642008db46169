package sigv4

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits on the request time.
const (
	// MaxSkew is how far a signed request's time may be from the server's.
	MaxSkew = 15 * time.Minute
	// MaxExpires is the longest a presigned URL may be valid.
	MaxExpires = 7 * 24 * time.Hour
)

// Keys finds the secret of an access key. SecretKey returns an error
// wrapping ErrUnknownAccessKey when the key does not exist.
type Keys interface {
	SecretKey(ctx context.Context, accessKey string) (string, error)
}

// StaticKeys is a fixed set of access key → secret.
type StaticKeys map[string]string

// SecretKey implements Keys.
func (k StaticKeys) SecretKey(_ context.Context, accessKey string) (string, error) {
	if s, ok := k[accessKey]; ok {
		return s, nil
	}
	return "", fmt.Errorf("%q: %w", accessKey, ErrUnknownAccessKey)
}

// A Verifier authenticates requests to one region's S3 service. It is
// safe for concurrent use.
type Verifier struct {
	Region string
	Keys   Keys
	// Now is the server clock; time.Now when nil.
	Now func() time.Time

	derived keyCache
}

// maxDerivedKeys bounds a keyCache.
const maxDerivedKeys = 1024

// keyCache remembers the signing keys derived from secrets: deriving one
// takes four HMACs, as much work as the rest of checking a small request's
// signature, and a key serves every request of its secret for a day. It
// holds the keys of the secrets and days in use (the scope's region and
// service are checked before, and the date is within a day of the server's
// clock), and starts afresh when it reaches maxDerivedKeys, which bounds it
// whatever the clients do. A changed secret derives a key of its own.
type keyCache struct {
	mu   sync.Mutex
	keys map[derivation][]byte
}

// derivation is what a signing key is derived from.
type derivation struct {
	secret string
	cred   credential
}

// key returns the signing key of secret for c's scope. The caller must not
// modify it.
func (kc *keyCache) key(secret string, c credential) []byte {
	c.accessKey = "" // not part of the derivation
	d := derivation{secret, c}
	kc.mu.Lock()
	k, ok := kc.keys[d]
	kc.mu.Unlock()
	if ok {
		return k
	}
	k = signingKey(secret, c)
	kc.mu.Lock()
	if kc.keys == nil || len(kc.keys) >= maxDerivedKeys {
		kc.keys = make(map[derivation][]byte)
	}
	kc.keys[d] = k
	kc.mu.Unlock()
	return k
}

// A Request is an authenticated request.
type Request struct {
	// AccessKey is the key that signed the request.
	AccessKey string
	// Presigned is set for query (presigned URL) authentication.
	Presigned bool
	// Body yields the payload: checked against the signed SHA-256, or
	// decoded from aws-chunked with every chunk signature verified.
	// Failures surface as errors from Read, never as io.EOF; read it
	// instead of the http.Request's body.
	Body io.Reader
	// DecodedLength is the payload's length, -1 when unknown.
	DecodedLength int64

	chunked *chunkedReader
}

// Trailer returns a trailing header of an aws-chunked body (names are
// lowercase); it is known once Body returned io.EOF.
func (r *Request) Trailer(name string) (string, bool) {
	if r.chunked == nil {
		return "", false
	}
	return r.chunked.Trailer(name)
}

// Verify authenticates r with an Authorization header or presigned-URL
// query parameters. It reads no body: the returned Request's Body checks
// the payload while it is read.
func (v *Verifier) Verify(r *http.Request) (*Request, error) {
	query, err := parseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, ErrSignatureMismatch)
	}
	header := r.Header.Get("Authorization")
	presigned := lookup(query, "X-Amz-Signature") != "" || lookup(query, "X-Amz-Algorithm") != "" ||
		lookup(query, "X-Amz-Credential") != ""
	switch {
	case header != "" && presigned:
		return nil, ErrMultipleAuth
	case header != "":
		return v.verifyHeader(r, header, query)
	case presigned:
		return v.verifyQuery(r, query)
	case lookup(query, "Signature") != "" && lookup(query, "AWSAccessKeyId") != "":
		return nil, fmt.Errorf("signature version 2: %w", ErrUnsupportedAuth)
	}
	return nil, ErrMissingAuth
}

// verifyHeader authenticates Authorization-header requests.
func (v *Verifier) verifyHeader(r *http.Request, header string, query []queryParam) (*Request, error) {
	a, err := parseAuthorization(header)
	if err != nil {
		return nil, err
	}
	amzDate := r.Header.Get("X-Amz-Date")
	if amzDate == "" {
		// SigV4 allows the Date header instead; it signs as ISO 8601.
		t, err := http.ParseTime(r.Header.Get("Date"))
		if err != nil {
			return nil, fmt.Errorf("no valid x-amz-date or Date header: %w", ErrMissingSecurityHeader)
		}
		amzDate = t.UTC().Format(timeFormat)
	}
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil {
		return nil, fmt.Errorf("x-amz-date %q is not YYYYMMDDTHHMMSSZ: %w", amzDate, ErrMissingSecurityHeader)
	}
	if err := v.checkScope(a.cred, t, ErrMalformedHeader); err != nil {
		return nil, err
	}
	if d := v.now().Sub(t); d > MaxSkew || d < -MaxSkew {
		return nil, fmt.Errorf("request time %s is %s from server time: %w", t.Format(time.RFC3339), d.Round(time.Second), ErrTimeSkewed)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return nil, fmt.Errorf("x-amz-content-sha256: %w", ErrMissingSecurityHeader)
	}
	sig, key, err := v.sign(r, a, amzDate, canonicalQuery(query, ""), payload)
	if err != nil {
		return nil, err
	}
	return v.payload(r, a, payload, &chunkSigner{key: key, amzDate: amzDate, scope: a.cred.scope(), prev: sig})
}

// verifyQuery authenticates presigned URLs.
func (v *Verifier) verifyQuery(r *http.Request, query []queryParam) (*Request, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf(format+": %w", append(args, ErrMalformedQuery)...)
	}
	if alg := lookup(query, "X-Amz-Algorithm"); alg != Algorithm {
		if alg == "" {
			return nil, bad("X-Amz-Algorithm missing")
		}
		return nil, fmt.Errorf("X-Amz-Algorithm %q: %w", alg, ErrUnsupportedAuth)
	}
	var a authorization
	var err error
	if a.cred, err = parseCredential(lookup(query, "X-Amz-Credential")); err != nil {
		return nil, bad("X-Amz-Credential: %v", err)
	}
	if a.signedHeaders, err = parseSignedHeaders(lookup(query, "X-Amz-SignedHeaders")); err != nil {
		return nil, bad("X-Amz-SignedHeaders: %v", err)
	}
	if a.signature, err = parseSignature(lookup(query, "X-Amz-Signature")); err != nil {
		return nil, bad("X-Amz-Signature: %v", err)
	}
	amzDate := lookup(query, "X-Amz-Date")
	t, err := time.Parse(timeFormat, amzDate)
	if err != nil {
		return nil, bad("X-Amz-Date %q is not YYYYMMDDTHHMMSSZ", amzDate)
	}
	secs, err := strconv.ParseInt(lookup(query, "X-Amz-Expires"), 10, 64)
	if err != nil || secs < 1 || secs > int64(MaxExpires/time.Second) {
		return nil, bad("X-Amz-Expires must be 1 to %d seconds", int64(MaxExpires/time.Second))
	}
	if err := v.checkScope(a.cred, t, ErrMalformedQuery); err != nil {
		return nil, err
	}
	now := v.now()
	switch {
	case now.Before(t.Add(-MaxSkew)):
		return nil, fmt.Errorf("request is not valid before %s: %w", t.Format(time.RFC3339), ErrExpired)
	case now.After(t.Add(time.Duration(secs) * time.Second)):
		return nil, fmt.Errorf("request expired at %s: %w", t.Add(time.Duration(secs)*time.Second).Format(time.RFC3339), ErrExpired)
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		payload = UnsignedPayload
	}
	if strings.HasPrefix(payload, "STREAMING-") {
		return nil, fmt.Errorf("%s with a presigned URL: %w", payload, ErrInvalidPayloadHash)
	}
	if _, _, err := v.sign(r, a, amzDate, canonicalQuery(query, "X-Amz-Signature"), payload); err != nil {
		return nil, err
	}
	req, err := v.payload(r, a, payload, nil)
	if req != nil {
		req.Presigned = true
	}
	return req, err
}

// checkScope checks that a credential scope fits this service and the
// request's time; malformed is the error of the auth mode.
func (v *Verifier) checkScope(c credential, t time.Time, malformed error) error {
	switch {
	case c.date != t.UTC().Format(dateFormat):
		return fmt.Errorf("credential date %s is not the request date %s: %w", c.date, t.UTC().Format(dateFormat), malformed)
	case c.region != v.Region:
		return fmt.Errorf("the region '%s' is wrong; expecting '%s': %w", c.region, v.Region, malformed)
	case c.service != "s3":
		return fmt.Errorf("service '%s' is not s3: %w", c.service, malformed)
	}
	return nil
}

// sign recomputes the request's signature and compares it with the
// client's. It returns the signature (hex) and the signing key, which seed
// the chunk signatures of a streaming body.
func (v *Verifier) sign(r *http.Request, a authorization, amzDate, query, payload string) (string, []byte, error) {
	if err := checkSignedHeaders(r, a.signedHeaders); err != nil {
		return "", nil, err
	}
	secret, err := v.Keys.SecretKey(r.Context(), a.cred.accessKey)
	if err != nil {
		return "", nil, err
	}
	key := v.derived.key(secret, a.cred)
	for _, path := range canonicalPaths(r) {
		canonical := canonicalRequest(r, path, a.signedHeaders, query, payload)
		want := hmacSHA256(key, stringToSign(Algorithm, amzDate, a.cred.scope(), sha256Hex(canonical)))
		if hmac.Equal(want, a.signature) {
			return hex.EncodeToString(want), key, nil
		}
	}
	return "", nil, ErrSignatureMismatch
}

// checkSignedHeaders requires host and every x-amz-* header present to be
// signed: an unsigned x-amz-meta-* or x-amz-content-sha256 could have been
// added or changed by anyone on the path.
func checkSignedHeaders(r *http.Request, signed []string) error {
	if !slices.Contains(signed, "host") {
		return fmt.Errorf("host is not signed: %w", ErrUnsignedHeaders)
	}
	var unsigned []string
	for name := range r.Header {
		lower := strings.ToLower(name)
		if strings.HasPrefix(lower, "x-amz-") && !slices.Contains(signed, lower) {
			unsigned = append(unsigned, lower)
		}
	}
	if len(unsigned) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(unsigned, ", "), ErrUnsignedHeaders)
	}
	return nil
}

// payload wraps the body according to the signed payload mode.
func (v *Verifier) payload(r *http.Request, a authorization, mode string, signer *chunkSigner) (*Request, error) {
	req := &Request{AccessKey: a.cred.accessKey, Body: r.Body, DecodedLength: r.ContentLength}
	if r.Body == nil {
		req.Body = http.NoBody
	}
	switch mode {
	case UnsignedPayload:
		return req, nil
	case StreamingPayload, StreamingPayloadTrailer, StreamingUnsignedTrailer:
		n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
		if err != nil || n < 0 {
			return nil, ErrMissingDecodedLength
		}
		if mode == StreamingUnsignedTrailer {
			signer = nil
		}
		var trailers []string
		if mode != StreamingPayload {
			for _, t := range strings.Split(r.Header.Get("X-Amz-Trailer"), ",") {
				if t = strings.ToLower(strings.TrimSpace(t)); t != "" {
					trailers = append(trailers, t)
				}
			}
		}
		req.chunked = newChunkedReader(req.Body, n, signer, trailers, mode == StreamingPayloadTrailer)
		req.Body, req.DecodedLength = req.chunked, n
		return req, nil
	}
	want, err := hex.DecodeString(mode)
	if err != nil || len(want) != sha256.Size {
		return nil, fmt.Errorf("%q: %w", mode, ErrInvalidPayloadHash)
	}
	req.Body = VerifyPayload(req.Body, r.ContentLength, Digest{
		Hash:     sha256.New(),
		Want:     func() ([]byte, error) { return want, nil },
		Mismatch: ErrPayloadHashMismatch,
	})
	return req, nil
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// lookup returns the first value of a query parameter.
func lookup(ps []queryParam, key string) string {
	for _, p := range ps {
		if p.key == key {
			return p.value
		}
	}
	return ""
}
