// Package sigv4 verifies AWS Signature Version 4 on requests an S3 server
// receives: the Authorization header, presigned URLs (query
// authentication), and the streaming aws-chunked bodies current clients
// send by default, with their chunk signatures and trailing headers.
//
// Verification rebuilds the canonical request from the headers the client
// says it signed, signs it with the secret of the claimed access key and
// compares the signatures in constant time. No well-kept Go module does
// this server side; the client half of the AWS SDK is used only in tests,
// as an independent signer.
package sigv4

import "errors"

// Errors a verification fails with. They are wrapped with the detail a
// client needs to fix its request; the S3 front end maps each to an S3
// error code and HTTP status.
var (
	// ErrMissingAuth: the request carries no signature at all (AccessDenied).
	ErrMissingAuth = errors.New("request is not signed")
	// ErrUnsupportedAuth: a signature scheme other than SigV4 HMAC-SHA256,
	// such as SigV2 or SigV4A.
	ErrUnsupportedAuth = errors.New("unsupported authorization mechanism")
	// ErrMultipleAuth: both an Authorization header and query
	// authentication.
	ErrMultipleAuth = errors.New("only one authentication mechanism is allowed")
	// ErrMalformedHeader: an Authorization header that does not parse, or
	// whose credential scope is wrong (AuthorizationHeaderMalformed).
	ErrMalformedHeader = errors.New("authorization header is malformed")
	// ErrMalformedQuery: presigned-URL parameters that do not parse
	// (AuthorizationQueryParametersError).
	ErrMalformedQuery = errors.New("authorization query parameters are malformed")
	// ErrMissingSecurityHeader: a header SigV4 requires is absent, such as
	// x-amz-content-sha256 or x-amz-date.
	ErrMissingSecurityHeader = errors.New("missing required security header")
	// ErrUnknownAccessKey: the access key id is not known (InvalidAccessKeyId).
	ErrUnknownAccessKey = errors.New("access key id does not exist")
	// ErrSignatureMismatch: the request, a chunk or the trailer was not
	// signed with the secret of the claimed key (SignatureDoesNotMatch).
	ErrSignatureMismatch = errors.New("signature does not match")
	// ErrUnsignedHeaders: x-amz-* headers present but not signed, which
	// anyone on the path could have added (AccessDenied).
	ErrUnsignedHeaders = errors.New("headers present in the request were not signed")
	// ErrTimeSkewed: the request time is too far from the server's clock
	// (RequestTimeTooSkewed).
	ErrTimeSkewed = errors.New("request time too skewed")
	// ErrExpired: a presigned URL past its expiry, or not valid yet
	// (AccessDenied).
	ErrExpired = errors.New("request has expired")
	// ErrInvalidPayloadHash: an x-amz-content-sha256 value that is neither
	// a SHA-256 nor a known payload mode (InvalidArgument).
	ErrInvalidPayloadHash = errors.New("invalid x-amz-content-sha256")
	// ErrPayloadHashMismatch: the body does not hash to the signed
	// x-amz-content-sha256 (XAmzContentSHA256Mismatch).
	ErrPayloadHashMismatch = errors.New("body does not match x-amz-content-sha256")
	// ErrMissingDecodedLength: an aws-chunked body without
	// x-amz-decoded-content-length (MissingContentLength).
	ErrMissingDecodedLength = errors.New("aws-chunked body without x-amz-decoded-content-length")
	// ErrMalformedChunk: aws-chunked framing that does not parse.
	ErrMalformedChunk = errors.New("malformed aws-chunked body")
	// ErrMalformedTrailer: trailing headers that do not parse, or a
	// declared trailer that never came (MalformedTrailerError).
	ErrMalformedTrailer = errors.New("malformed aws-chunked trailer")
	// ErrDecodedLength: the decoded body is not as long as
	// x-amz-decoded-content-length said (IncompleteBody).
	ErrDecodedLength = errors.New("decoded body length differs from x-amz-decoded-content-length")
)
