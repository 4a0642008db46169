package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"time"
)

// xmlns is the namespace of every S3 XML document.
const xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"

// Body size limits of the XML requests. A DeleteObjects of 1000 keys of
// 1024 bytes fits, and so does a lifecycle configuration of 1000 rules
// with prefixes as long as keys; other configuration documents are far
// smaller.
const (
	maxDeleteBody    = 2 << 20
	maxLifecycleBody = 2 << 20
	maxConfigBody    = 64 << 10
)

// timeISO is how S3 XML renders instants.
const timeISO = "2006-01-02T15:04:05.000Z"

func isoTime(t time.Time) string { return t.UTC().Format(timeISO) }

// writeXML sends v as an XML document with the given status.
func writeXML(w http.ResponseWriter, status int, v any) error {
	var b bytes.Buffer
	b.WriteString(xml.Header)
	if err := xml.NewEncoder(&b).Encode(v); err != nil {
		return fmt.Errorf("encoding %T: %w", v, err)
	}
	w.Header().Set("Content-Type", "application/xml")
	w.Header().Set("Content-Length", fmt.Sprint(b.Len()))
	w.WriteHeader(status)
	_, err := w.Write(b.Bytes())
	return err
}

// readBody reads a small request body in full, up to limit bytes, and
// checks its Content-MD5 and x-amz-checksum-* when given.
func readBody(q *request, limit int64) ([]byte, error) {
	body, _, err := checksumBody(q, q.auth.Body, q.auth.DecodedLength)
	if err != nil {
		return nil, err
	}
	return readChecked(q, body, limit)
}

// readChecked reads body, of at most limit bytes, and checks it against
// the request's Content-MD5.
func readChecked(q *request, body io.Reader, limit int64) ([]byte, error) {
	md5sum, err := contentMD5(q.r.Header)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(body, limit+1))
	switch {
	case err != nil:
		return nil, err
	case int64(len(b)) > limit:
		return nil, errMaxMessageLength.with("The request body exceeds %d bytes.", limit)
	case md5sum != nil && !bytes.Equal(md5sum, md5Sum(b)):
		return nil, errBadDigest
	}
	return b, nil
}

func md5Sum(b []byte) []byte {
	s := md5.Sum(b)
	return s[:]
}

// decodeXML parses a request document into v. The root element must be
// the one v names (namespaces are not checked, as S3 accepts documents
// with and without one), and only white space, comments and processing
// instructions may follow it.
func decodeXML(b []byte, v any) error {
	d := xml.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(v); err != nil {
		return errMalformedXML
	}
	for {
		tok, err := d.Token()
		switch {
		case err == io.EOF:
			return nil
		case err != nil:
			return errMalformedXML
		}
		switch t := tok.(type) {
		case xml.Comment, xml.ProcInst:
		case xml.CharData:
			if len(bytes.TrimSpace(t)) > 0 {
				return errMalformedXML
			}
		default:
			return errMalformedXML
		}
	}
}

// contentMD5 decodes a Content-MD5 header; nil when absent.
func contentMD5(h http.Header) ([]byte, error) {
	v, ok := h["Content-Md5"]
	if !ok {
		return nil, nil
	}
	sum, err := base64.StdEncoding.DecodeString(v[0])
	if err != nil || len(sum) != md5.Size {
		return nil, errInvalidDigest
	}
	return sum, nil
}

// errorDoc is the body of an error response.
type errorDoc struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string
	Message   string
	Resource  string
	RequestID string `xml:"RequestId"`
}

// Owner is the owner of a bucket, a version or an upload, as listings
// show it.
type Owner struct {
	ID          string
	DisplayName string
}
