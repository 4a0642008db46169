package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// An Error is an S3 error response: a code, its HTTP status and a message
// for the client.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// with returns a copy of e with a more specific message.
func (e *Error) with(format string, args ...any) *Error {
	c := *e
	c.Message = fmt.Sprintf(format, args...)
	return &c
}

// Errors the handlers raise themselves. Errors of the core and of SigV4
// verification are translated by apiError.
var (
	errAccessDenied        = &Error{"AccessDenied", http.StatusForbidden, "Access Denied."}
	errBadDigest           = &Error{"BadDigest", http.StatusBadRequest, "The Content-MD5 you specified did not match what we received."}
	errBucketAlreadyExists = &Error{"BucketAlreadyExists", http.StatusConflict, "The requested bucket name is not available. Please select a different name and try again."}
	errBucketOwnedByYou    = &Error{"BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."}
	errEntityTooLarge      = &Error{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."}
	errIllegalLocation     = &Error{"IllegalLocationConstraintException", http.StatusBadRequest, "The location constraint is not valid for this endpoint."}
	errIllegalVersioning   = &Error{"IllegalVersioningConfigurationException", http.StatusBadRequest, "The versioning configuration specified in the request is invalid."}
	errIncompleteBody      = &Error{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	errInternal            = &Error{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
	errInvalidArgument     = &Error{"InvalidArgument", http.StatusBadRequest, "Invalid Argument."}
	errInvalidBucketName   = &Error{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}
	errInvalidPart         = &Error{"InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found. The part might not have been uploaded, or the specified ETag might not have matched the uploaded part's ETag."}
	errInvalidPartNumber   = &Error{"InvalidPartNumber", http.StatusRequestedRangeNotSatisfiable, "The requested partnumber is not satisfiable."}
	errInvalidDigest       = &Error{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid."}
	errInvalidRange        = &Error{"InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable."}
	errInvalidRequest      = &Error{"InvalidRequest", http.StatusBadRequest, "Invalid Request."}
	errInvalidStorageClass = &Error{"InvalidStorageClass", http.StatusBadRequest, "The storage class you specified is not valid."}
	errKeyTooLong          = &Error{"KeyTooLongError", http.StatusBadRequest, "Your key is too long."}
	errMalformedTrailer    = &Error{"MalformedTrailerError", http.StatusBadRequest, "The request contained trailing data that was not well-formed or did not conform to our published schema."}
	errMalformedXML        = &Error{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	errMaxMessageLength    = &Error{"MaxMessageLengthExceeded", http.StatusBadRequest, "Your request was too big."}
	errMetadataTooLarge    = &Error{"MetadataTooLarge", http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size."}
	errMethodNotAllowed    = &Error{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	errNoSuchBucket        = &Error{"NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist."}
	errNoSuchKey           = &Error{"NoSuchKey", http.StatusNotFound, "The specified key does not exist."}
	errNoSuchLifecycle     = &Error{"NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist."}
	errNoSuchUpload        = &Error{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist. The upload ID might be invalid, or the multipart upload might have been aborted or completed."}
	errNoSuchVersion       = &Error{"NoSuchVersion", http.StatusNotFound, "The specified version does not exist."}
	errNotImplemented      = &Error{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	errPreconditionFailed  = &Error{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold."}
	errSignatureMismatch   = &Error{"SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	errSlowDown            = &Error{"SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate."}
	errUnavailable         = &Error{"ServiceUnavailable", http.StatusServiceUnavailable, "Please reduce your request rate."}
	// errNoSpace is not an AWS error (S3 never runs out of disk); other
	// S3 servers answer a full disk with this status, which SDKs do not
	// retry, and a code of this kind.
	errNoSpace = &Error{"InsufficientStorage", http.StatusInsufficientStorage, "The server's disk is full: nothing was stored. Try again once space has been freed."}
)

// translations maps the sentinel errors of the core and of SigV4
// verification to S3 errors. Order matters only where an error wraps two
// sentinels; the first match wins.
var translations = []struct {
	sentinel error
	to       *Error
}{
	{meta.ErrNoSuchBucket, errNoSuchBucket},
	{meta.ErrBucketExists, errBucketAlreadyExists},
	{meta.ErrBucketNotEmpty, &Error{"BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty."}},
	{meta.ErrInvalidBucketName, errInvalidBucketName},
	{meta.ErrDeleteMarker, errMethodNotAllowed},
	{meta.ErrNoSuchKey, errNoSuchKey},
	{meta.ErrNoSuchVersion, errNoSuchVersion},
	{meta.ErrInvalidKey, errInvalidArgument.with("The specified key is not valid.")},
	{meta.ErrInvalidVersionID, errInvalidArgument.with("Invalid version id specified")},
	{meta.ErrInvalidArgument, errInvalidArgument},
	{meta.ErrInvalidVersioning, errIllegalVersioning},
	{meta.ErrBadDigest, errBadDigest},
	{meta.ErrIncompleteBody, errIncompleteBody},
	// Before io.ErrUnexpectedEOF: a chunk's body cut mid-read wraps both.
	{data.ErrUnavailable, errUnavailable},
	{io.ErrUnexpectedEOF, errIncompleteBody},
	{meta.ErrInvalidRange, errInvalidRange},
	{meta.ErrPreconditionFailed, errPreconditionFailed},
	{meta.ErrNoSuchUpload, errNoSuchUpload},
	{meta.ErrInvalidPartOrder, &Error{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order. The parts list must be specified in order by part number."}},
	{meta.ErrInvalidPart, errInvalidPart},
	{meta.ErrEntityTooSmall, &Error{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size."}},
	{meta.ErrConflict, &Error{"OperationAborted", http.StatusConflict, "A conflicting conditional operation is currently in progress against this resource. Please try again."}},
	{meta.ErrUnavailable, errUnavailable},

	{sigv4.ErrMissingAuth, errAccessDenied},
	{sigv4.ErrUnsupportedAuth, errInvalidRequest.with("The authorization mechanism you have provided is not supported. Please use %s.", sigv4.Algorithm)},
	{sigv4.ErrMultipleAuth, errInvalidArgument.with("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter, Signature query string parameter or the Authorization header should be specified.")},
	{sigv4.ErrMalformedHeader, &Error{"AuthorizationHeaderMalformed", http.StatusBadRequest, "The authorization header is malformed."}},
	{sigv4.ErrMalformedQuery, &Error{"AuthorizationQueryParametersError", http.StatusBadRequest, "Query-string authentication requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters."}},
	{sigv4.ErrMissingSecurityHeader, &Error{"MissingSecurityHeader", http.StatusBadRequest, "Your request is missing a required header."}},
	{sigv4.ErrUnknownAccessKey, &Error{"InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records."}},
	{sigv4.ErrSignatureMismatch, errSignatureMismatch},
	{sigv4.ErrUnsignedHeaders, errAccessDenied.with("There were headers present in the request which were not signed.")},
	{sigv4.ErrTimeSkewed, &Error{"RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the current time is too large."}},
	{sigv4.ErrExpired, errAccessDenied.with("Request has expired.")},
	{sigv4.ErrInvalidPayloadHash, errInvalidArgument.with("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, a STREAMING-* payload mode, or a valid sha256 value.")},
	{sigv4.ErrPayloadHashMismatch, &Error{"XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."}},
	{sigv4.ErrMissingDecodedLength, &Error{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}},
	{sigv4.ErrMalformedChunk, errInvalidRequest.with("The aws-chunked body is malformed.")},
	{sigv4.ErrMalformedTrailer, errMalformedTrailer},
	{sigv4.ErrDecodedLength, errIncompleteBody},
}

// opaque are the sentinels whose S3 error always keeps its own message:
// the text they wrap describes our backends (hosts, drivers), not the
// client's request, and reaches only the log.
var opaque = []error{meta.ErrUnavailable, data.ErrUnavailable}

// apiError is the one place errors become S3 errors. An *Error raised by
// a handler passes as is; a sentinel of the core or of SigV4 gets its S3
// code, with the wrapped error's text as message when it carries more
// detail than the sentinel alone and the sentinel is not opaque; anything else is an internal error,
// whose detail is logged, never sent.
func apiError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if meta.IsNoSpace(err) {
		return errNoSpace
	}
	for _, t := range translations {
		if errors.Is(err, t.sentinel) {
			if err.Error() == t.sentinel.Error() || slices.Contains(opaque, t.sentinel) {
				return t.to
			}
			return t.to.with("%s", err.Error())
		}
	}
	if errors.Is(err, context.Canceled) {
		return &Error{"RequestTimeout", http.StatusBadRequest, "The request was canceled."}
	}
	return errInternal
}
