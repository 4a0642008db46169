package sigv4

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

// TestVerifyPayload reads payloads as a PUT does, in reads of any size
// into one buffer it reuses at once, and checks the verdict that comes
// with the last bytes.
func TestVerifyPayload(t *testing.T) {
	body := make([]byte, 3<<20+5)
	rand.NewChaCha8([32]byte{1}).Read(body)
	sum := sha256.Sum256(body)
	errMismatch := errors.New("mismatch")
	verify := func(r io.Reader, size int64, want []byte) ([]byte, error) {
		v := VerifyPayload(r, size, Digest{Hash: sha256.New(),
			Want: func() ([]byte, error) { return want, nil }, Mismatch: errMismatch})
		var got []byte
		buf := make([]byte, 128<<10+7)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			n, err := v.Read(buf[:1+rng.IntN(len(buf)-1)])
			got = append(got, buf[:n]...)
			clear(buf) // the caller owns its buffer again
			if err != nil {
				return got, err
			}
		}
	}
	for _, tt := range []struct {
		name string
		r    io.Reader
		size int64
		want []byte
		err  error
	}{
		{"whole", bytes.NewReader(body), int64(len(body)), sum[:], io.EOF},
		{"length unknown", iotest.HalfReader(bytes.NewReader(body)), -1, sum[:], io.EOF},
		{"wrong sum", bytes.NewReader(body), int64(len(body)), make([]byte, 32), errMismatch},
		{"short", bytes.NewReader(body[:100]), int64(len(body)), sum[:], io.ErrUnexpectedEOF},
		{"breaks off", iotest.TimeoutReader(bytes.NewReader(body)), -1, sum[:], iotest.ErrTimeout},
		{"empty", bytes.NewReader(nil), 0, func() []byte { s := sha256.Sum256(nil); return s[:] }(), io.EOF},
	} {
		got, err := verify(tt.r, tt.size, tt.want)
		if err != tt.err {
			t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
		}
		if tt.err == io.EOF && tt.size != 0 && !bytes.Equal(got, body) {
			t.Errorf("%s: read %d bytes differing from the %d of the body", tt.name, len(got), len(body))
		}
	}
}
