package sigv4

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// Algorithm is the only signing algorithm accepted.
const Algorithm = "AWS4-HMAC-SHA256"

const (
	timeFormat = "20060102T150405Z" // x-amz-date, X-Amz-Date
	dateFormat = "20060102"         // the date of a credential scope
	terminator = "aws4_request"
)

// credential is the Credential part of a signature:
// ACCESSKEY/DATE/REGION/SERVICE/aws4_request.
type credential struct {
	accessKey, date, region, service string
}

func (c credential) scope() string {
	return c.date + "/" + c.region + "/" + c.service + "/" + terminator
}

// authorization is what a client claims: who signed, what, and the
// signature. It comes from the Authorization header or the X-Amz-* query
// parameters of a presigned URL.
type authorization struct {
	cred          credential
	signedHeaders []string
	signature     []byte // 32 bytes
}

// parseAuthorization parses an Authorization header of the form
//
//	AWS4-HMAC-SHA256 Credential=AK/20260102/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=<64 hex>
//
// The three fields may come in any order, separated by commas and
// optional spaces; each must appear exactly once.
func parseAuthorization(h string) (authorization, error) {
	var a authorization
	alg, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	if alg != Algorithm {
		if alg == "AWS" || strings.HasPrefix(alg, "AWS4-") {
			return a, fmt.Errorf("%q: %w", alg, ErrUnsupportedAuth)
		}
		return a, fmt.Errorf("algorithm %q is not %s: %w", alg, Algorithm, ErrMalformedHeader)
	}
	var seen [3]bool
	for _, field := range strings.Split(rest, ",") {
		name, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return a, fmt.Errorf("field %q is not Name=value: %w", field, ErrMalformedHeader)
		}
		var err error
		i := -1
		switch name {
		case "Credential":
			i = 0
			a.cred, err = parseCredential(value)
		case "SignedHeaders":
			i = 1
			a.signedHeaders, err = parseSignedHeaders(value)
		case "Signature":
			i = 2
			a.signature, err = parseSignature(value)
		default:
			return a, fmt.Errorf("unknown field %q: %w", name, ErrMalformedHeader)
		}
		if err != nil {
			return a, fmt.Errorf("%v: %w", err, ErrMalformedHeader)
		}
		if seen[i] {
			return a, fmt.Errorf("field %s repeated: %w", name, ErrMalformedHeader)
		}
		seen[i] = true
	}
	if seen != [3]bool{true, true, true} {
		return a, fmt.Errorf("the fields Credential, SignedHeaders and Signature are all required: %w", ErrMalformedHeader)
	}
	return a, nil
}

// parseCredential splits ACCESSKEY/DATE/REGION/SERVICE/aws4_request.
// Whether the scope fits the request is checked later, against its time.
func parseCredential(s string) (credential, error) {
	p := strings.Split(s, "/")
	if len(p) != 5 || p[4] != terminator || p[0] == "" || p[2] == "" || p[3] == "" {
		return credential{}, fmt.Errorf("credential %q is not ACCESSKEY/DATE/REGION/SERVICE/%s", s, terminator)
	}
	if _, err := time.Parse(dateFormat, p[1]); err != nil {
		return credential{}, fmt.Errorf("credential date %q is not YYYYMMDD", p[1])
	}
	return credential{accessKey: p[0], date: p[1], region: p[2], service: p[3]}, nil
}

// parseSignedHeaders splits the ';'-separated list of lowercase header
// names the client signed.
func parseSignedHeaders(s string) ([]string, error) {
	names := strings.Split(s, ";")
	for _, n := range names {
		if n == "" || n != strings.ToLower(n) || strings.ContainsAny(n, " \t:") {
			return nil, fmt.Errorf("signed headers %q: bad name %q", s, n)
		}
	}
	return names, nil
}

func parseSignature(s string) ([]byte, error) {
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("signature %q is not 64 hex digits", s)
	}
	return b, nil
}
