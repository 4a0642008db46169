package meta

import (
	"errors"
	"syscall"
)

// Sentinel errors of the meta contract. Backends wrap them with context;
// front ends map them to S3 error codes and errno values at their edges.
var (
	ErrNoSuchBucket       = errors.New("no such bucket")
	ErrBucketExists       = errors.New("bucket already exists")
	ErrBucketNotEmpty     = errors.New("bucket not empty")
	ErrInvalidBucketName  = errors.New("invalid bucket name")
	ErrNoSuchKey          = errors.New("no such key")
	ErrNoSuchVersion      = errors.New("no such version")
	ErrInvalidKey         = errors.New("invalid key")
	ErrInvalidVersionID   = errors.New("invalid version id")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrInvalidVersioning  = errors.New("invalid versioning state change")
	ErrCorrupt            = errors.New("corrupt metadata")
	ErrDeleteMarker       = errors.New("version is a delete marker")
	ErrBadDigest          = errors.New("content digest mismatch")
	ErrIncompleteBody     = errors.New("body shorter or longer than declared")
	ErrInvalidRange       = errors.New("range not satisfiable")
	ErrPreconditionFailed = errors.New("precondition failed")
	ErrNoSuchUpload       = errors.New("no such upload")
	ErrInvalidPart        = errors.New("invalid part")
	ErrInvalidPartOrder   = errors.New("parts not in ascending order")
	ErrEntityTooSmall     = errors.New("part smaller than the minimum")
	ErrNoSuchAccessKey    = errors.New("no such access key")
	ErrAccessKeyExists    = errors.New("access key already exists")
	ErrNoSuchCheckpoint   = errors.New("no such checkpoint")
	ErrConflict           = errors.New("transaction conflict")
	ErrUnavailable        = errors.New("meta store unavailable")
)

// IsNoSpace reports whether err means that a disk a store writes to is
// full or its quota reached: the local chunk store and bolt pass the
// system's ENOSPC and EDQUOT on. Front ends answer it as such, not as an
// internal failure, since the same request succeeds once space is freed.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}
