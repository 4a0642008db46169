package s3

import (
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
)

// TestAPIErrorMessages: a client error carries what the core said about
// the request; an unavailable backend says nothing of our hosts or drivers.
func TestAPIErrorMessages(t *testing.T) {
	for _, c := range []struct {
		err        error
		code, msg  string
		wantStatus int
	}{
		{fmt.Errorf("get b/k: %w", meta.ErrNoSuchKey), "NoSuchKey", "get b/k: " + meta.ErrNoSuchKey.Error(), 404},
		{meta.ErrNoSuchKey, "NoSuchKey", errNoSuchKey.Message, 404},
		{fmt.Errorf("put b/k: gocql: no hosts available in the pool 10.0.0.5: %w", meta.ErrUnavailable), "ServiceUnavailable", "Please reduce your request rate.", 503},
		{fmt.Errorf("read chunk 0f from s3://chunks/: %w: dial tcp 10.0.0.6:9000: connection refused", data.ErrUnavailable), "ServiceUnavailable", "Please reduce your request rate.", 503},
		{fmt.Errorf("read chunk 0f: %w: %w", data.ErrUnavailable, io.ErrUnexpectedEOF), "ServiceUnavailable", "Please reduce your request rate.", 503},
		{fmt.Errorf("disk on fire"), "InternalError", errInternal.Message, 500},
		{fmt.Errorf("put b/k: put chunk 0f: %w", &fs.PathError{Op: "write", Path: "/data/tmp/1", Err: syscall.ENOSPC}), "InsufficientStorage", errNoSpace.Message, 507},
		{fmt.Errorf("put b/k: %w", &fs.PathError{Op: "write", Path: "/data/meta.db", Err: syscall.EDQUOT}), "InsufficientStorage", errNoSpace.Message, 507},
	} {
		e := apiError(c.err)
		if e.Code != c.code || e.Message != c.msg || e.Status != c.wantStatus {
			t.Errorf("apiError(%q) = %s %d %q, want %s %d %q", c.err, e.Code, e.Status, e.Message, c.code, c.wantStatus, c.msg)
		}
	}
}
