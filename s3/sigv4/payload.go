package sigv4

import (
	"bytes"
	"hash"
	"io"
)

// A Digest is one check of a payload against an expected sum.
type Digest struct {
	Hash hash.Hash
	// Want returns the expected sum. It is called once, after the whole
	// payload went through Hash, so it may read a value that arrives
	// after the body, such as an aws-chunked trailer.
	Want func() ([]byte, error)
	// Mismatch is the error returned when the sums differ.
	Mismatch error
}

// VerifyPayload returns a reader of r that feeds every byte to the
// digests and checks them once the payload is complete: at io.EOF, or as
// soon as size bytes were read when size ≥ 0. A failed check is returned
// in place of io.EOF, together with the last bytes at the latest, so a
// consumer that commits only on a clean EOF never commits a payload that
// failed. A payload shorter than size fails with io.ErrUnexpectedEOF.
// Errors are sticky.
func VerifyPayload(r io.Reader, size int64, ds ...Digest) io.Reader {
	return &verifyingReader{r: r, left: size, ds: ds}
}

type verifyingReader struct {
	r    io.Reader
	left int64 // bytes still expected; negative when unknown
	ds   []Digest
	err  error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.left >= 0 && int64(len(p)) > v.left {
		p = p[:v.left]
	}
	n, err := v.r.Read(p)
	for _, d := range v.ds {
		d.Hash.Write(p[:n])
	}
	if v.left >= 0 {
		v.left -= int64(n)
	}
	switch {
	case err == io.EOF && v.left > 0:
		err = io.ErrUnexpectedEOF
	case err == io.EOF, err == nil && v.left == 0:
		err = v.check()
	}
	v.err = err
	return n, err
}

// check compares every digest; it returns io.EOF when all match.
func (v *verifyingReader) check() error {
	for _, d := range v.ds {
		want, err := d.Want()
		if err != nil {
			return err
		}
		if !bytes.Equal(d.Hash.Sum(nil), want) {
			return d.Mismatch
		}
	}
	return io.EOF
}
