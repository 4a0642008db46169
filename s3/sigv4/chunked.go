package sigv4

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"strconv"
	"strings"
)

// Payload modes: the values of x-amz-content-sha256 other than a literal
// SHA-256 of the body.
const (
	UnsignedPayload          = "UNSIGNED-PAYLOAD"
	StreamingPayload         = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingPayloadTrailer  = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
)

// Limits of the aws-chunked framing. Lines beyond them are not from an
// honest client; they bound the memory one request can make us hold.
const (
	maxChunkLine  = 4 << 10 // "size;chunk-signature=..." or one trailer
	maxTrailers   = 16      // trailing header lines
	trailerSigKey = "x-amz-trailer-signature"
)

// chunkSigner recomputes the chained signatures of a signed aws-chunked
// body: each chunk's signature covers the previous one, starting from the
// request's (the seed), so chunks cannot be dropped, reordered or swapped.
type chunkSigner struct {
	key            []byte
	amzDate, scope string
	prev           string // hex signature of the previous chunk
}

// verify checks got, the signature the client sent for the next element
// (kind is the chunk or the trailer algorithm line), and chains it.
func (s *chunkSigner) verify(kind, payloadHash string, got []byte) error {
	lines := []string{s.prev, payloadHash}
	if kind == "AWS4-HMAC-SHA256-PAYLOAD" {
		lines = []string{s.prev, emptySHA256, payloadHash}
	}
	want := hmacSHA256(s.key, stringToSign(kind, s.amzDate, s.scope, lines...))
	if !hmac.Equal(want, got) {
		return ErrSignatureMismatch
	}
	s.prev = hex.EncodeToString(got)
	return nil
}

// chunkedReader decodes an aws-chunked body:
//
//	hex-size[;chunk-signature=sig]\r\n data \r\n ... 0[;chunk-signature=sig]\r\n [trailer:value\r\n ...] \r\n
//
// It streams each chunk's data as it arrives and verifies the chunk's
// signature when the chunk ends. As soon as the last data byte of a chunk
// is read it also reads the next chunk header, and when that is the final
// chunk, the trailers; so the read that returns the body's last bytes
// already carries any verification failure, or io.EOF.
type chunkedReader struct {
	src      *bufio.Reader
	signer   *chunkSigner // nil when chunks are unsigned
	trailers map[string]string
	declared []string // trailer names from x-amz-trailer
	signedTr bool     // the trailer carries x-amz-trailer-signature
	size     int64    // x-amz-decoded-content-length
	n        int64    // data bytes decoded so far
	left     int64    // data bytes left in the current chunk
	sum      hash.Hash
	chunkSig []byte
	err      error
}

func newChunkedReader(r io.Reader, size int64, signer *chunkSigner, trailers []string, signedTrailer bool) *chunkedReader {
	c := &chunkedReader{
		src:      bufio.NewReaderSize(r, 64<<10),
		signer:   signer,
		declared: trailers,
		signedTr: signedTrailer,
		size:     size,
	}
	if signer != nil {
		c.sum = sha256.New()
	}
	return c
}

// Trailer returns a trailing header's value once the body was read to
// io.EOF.
func (c *chunkedReader) Trailer(name string) (string, bool) {
	v, ok := c.trailers[name]
	return v, ok
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	if c.left == 0 { // only before the first chunk: later ones start eagerly
		if err := c.startChunk(); err != nil {
			return 0, c.fail(err)
		}
		if c.err != nil {
			return 0, c.err
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.src.Read(p)
	c.left -= int64(n)
	c.n += int64(n)
	if c.sum != nil {
		c.sum.Write(p[:n])
	}
	if err != nil {
		return n, c.fail(err)
	}
	if c.left == 0 {
		if err := c.endChunk(); err != nil {
			return n, c.fail(err)
		}
		if err := c.startChunk(); err != nil {
			return n, c.fail(err)
		}
	}
	return n, c.err
}

// fail makes err sticky; a body that ends early is io.ErrUnexpectedEOF.
func (c *chunkedReader) fail(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	c.err = err
	return err
}

// startChunk reads a chunk header. A zero-size chunk ends the body: its
// signature, the trailers and the length are checked and c.err becomes
// io.EOF.
func (c *chunkedReader) startChunk() error {
	line, err := c.line()
	if err != nil {
		return err
	}
	sizeHex, ext, _ := strings.Cut(line, ";")
	size, err := strconv.ParseInt(sizeHex, 16, 64)
	if err != nil || size < 0 || sizeHex == "" || sizeHex[0] == '+' || sizeHex[0] == '-' {
		return fmt.Errorf("chunk size %q: %w", sizeHex, ErrMalformedChunk)
	}
	if size > c.size-c.n {
		return fmt.Errorf("chunk of %d bytes after %d exceeds %d: %w", size, c.n, c.size, ErrDecodedLength)
	}
	if c.signer != nil {
		sig, ok := strings.CutPrefix(ext, "chunk-signature=")
		if !ok {
			return fmt.Errorf("chunk without chunk-signature: %w", ErrMalformedChunk)
		}
		if c.chunkSig, err = parseSignature(sig); err != nil {
			return fmt.Errorf("%v: %w", err, ErrMalformedChunk)
		}
	}
	c.left = size
	if size > 0 {
		return nil
	}
	if err := c.verifyChunk(); err != nil {
		return err
	}
	if err := c.readTrailers(); err != nil {
		return err
	}
	if c.n != c.size {
		return fmt.Errorf("decoded %d bytes, declared %d: %w", c.n, c.size, ErrDecodedLength)
	}
	c.err = io.EOF
	return nil
}

// endChunk reads the CRLF after a chunk's data and checks its signature.
func (c *chunkedReader) endChunk() error {
	var crlf [2]byte
	if _, err := io.ReadFull(c.src, crlf[:]); err != nil {
		return err
	}
	if crlf != [2]byte{'\r', '\n'} {
		return fmt.Errorf("chunk data not followed by CRLF: %w", ErrMalformedChunk)
	}
	return c.verifyChunk()
}

func (c *chunkedReader) verifyChunk() error {
	if c.signer == nil {
		return nil
	}
	sum := hex.EncodeToString(c.sum.Sum(nil))
	c.sum.Reset()
	if err := c.signer.verify("AWS4-HMAC-SHA256-PAYLOAD", sum, c.chunkSig); err != nil {
		return fmt.Errorf("chunk ending at byte %d: %w", c.n, err)
	}
	return nil
}

// readTrailers reads "name:value" lines up to the empty line that ends the
// body, keeps the declared ones and checks the trailer signature.
func (c *chunkedReader) readTrailers() error {
	c.trailers = make(map[string]string, len(c.declared))
	var signed bytes.Buffer // "name:value\n" lines, the trailer's signed form
	var sig []byte
	for i := 0; ; i++ {
		line, err := c.line()
		if err != nil {
			return err
		}
		if line == "" {
			break
		}
		if i == maxTrailers {
			return fmt.Errorf("more than %d trailers: %w", maxTrailers, ErrMalformedTrailer)
		}
		name, value, ok := strings.Cut(line, ":")
		name, value = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(value)
		switch {
		case !ok:
			return fmt.Errorf("trailer %q is not name:value: %w", line, ErrMalformedTrailer)
		case name == trailerSigKey && c.signedTr && sig == nil:
			if sig, err = parseSignature(value); err != nil {
				return fmt.Errorf("%v: %w", err, ErrMalformedTrailer)
			}
			continue
		case !slices.Contains(c.declared, name):
			return fmt.Errorf("trailer %q not declared in x-amz-trailer: %w", name, ErrMalformedTrailer)
		}
		if _, dup := c.trailers[name]; dup {
			return fmt.Errorf("trailer %q repeated: %w", name, ErrMalformedTrailer)
		}
		c.trailers[name] = value
		signed.WriteString(name + ":" + value + "\n")
	}
	for _, name := range c.declared {
		if _, ok := c.trailers[name]; !ok {
			return fmt.Errorf("declared trailer %q missing: %w", name, ErrMalformedTrailer)
		}
	}
	if !c.signedTr {
		return nil
	}
	if sig == nil {
		return fmt.Errorf("no %s: %w", trailerSigKey, ErrMalformedTrailer)
	}
	if err := c.signer.verify("AWS4-HMAC-SHA256-TRAILER", sha256Hex(signed.String()), sig); err != nil {
		return fmt.Errorf("trailer: %w", err)
	}
	return nil
}

// line reads one CRLF-terminated line of framing, without the CRLF.
func (c *chunkedReader) line() (string, error) {
	b, err := c.src.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull) || len(b) > maxChunkLine:
		return "", fmt.Errorf("framing line longer than %d bytes: %w", maxChunkLine, ErrMalformedChunk)
	case err != nil:
		return "", err
	case len(b) < 2 || b[len(b)-2] != '\r':
		return "", fmt.Errorf("framing line not ended by CRLF: %w", ErrMalformedChunk)
	}
	return string(b[:len(b)-2]), nil
}
