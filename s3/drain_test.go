package s3

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// countingZeros yields n zero bytes and counts those read.
type countingZeros struct{ n, read int64 }

func (z *countingZeros) Read(p []byte) (int, error) {
	if z.read == z.n {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), z.n-z.read)]
	clear(p)
	z.read += int64(len(p))
	return len(p), nil
}

// TestErrorDrainsTheBody: a PUT refused before its body was read (here:
// no such bucket) reads what the client sends before the error answers
// it, up to maxDrain, so that the client is not cut off mid-send and
// reads the answer; a body the client holds back for 100 Continue is
// left unread.
func TestErrorDrainsTheBody(t *testing.T) {
	f := newGetFixture(t)
	for _, c := range []struct {
		name     string
		size     int64
		expect   bool
		wantRead int64
	}{
		{"3 MiB", 3 << 20, false, 3 << 20},
		{"past the bound", maxDrain + 1<<20, false, maxDrain},
		{"Expect: 100-continue", 3 << 20, true, 0},
	} {
		body := &countingZeros{n: c.size}
		header := map[string]string{}
		if c.expect {
			header["Expect"] = "100-continue"
		}
		r := signed(t, http.MethodPut, "http://s3.local/nobucket/k", body, header)
		r.ContentLength = c.size
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound {
			t.Fatalf("%s: PUT to a missing bucket answered %d %s", c.name, w.Code, w.Body)
		}
		if body.read != c.wantRead {
			t.Errorf("%s: the body was read for %d bytes, want %d", c.name, body.read, c.wantRead)
		}
	}
}
