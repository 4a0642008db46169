package s3

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// maxPutSize is S3's limit on a single PUT; larger objects need multipart.
const maxPutSize = 5 << 30

func (h *Handler) getObject(w http.ResponseWriter, q *request) error {
	return h.readObject(w, q, true)
}

func (h *Handler) headObject(w http.ResponseWriter, q *request) error {
	return h.readObject(w, q, false)
}

// readObject serves GET and HEAD: preconditions, a single range, the
// response-* overrides and, when asked, the stored checksums.
func (h *Handler) readObject(w http.ResponseWriter, q *request, withBody bool) error {
	if withBody {
		release, ok := h.reads.take()
		if !ok {
			return errSlowDown.with("More than %d objects are being read.", h.cfg.MaxReads)
		}
		defer release()
	}
	versionID, err := versionParam(q)
	if err != nil {
		return err
	}
	part, err := partNumberParam(q)
	if err != nil {
		return err
	}
	if part > 0 && q.r.Header.Get("Range") != "" {
		return errInvalidRequest.with("Cannot specify both Range header and partNumber query parameter.")
	}
	hdr := w.Header()
	v, err := h.headVersion(q, hdr, versionID)
	if err != nil {
		return err
	}
	switch readPreconditions(q.r.Header, "").evaluate(v) {
	case http.StatusPreconditionFailed:
		return errPreconditionFailed
	case http.StatusNotModified:
		hdr.Set("ETag", `"`+v.ETag+`"`)
		hdr.Set("Last-Modified", v.LastModified().Format(http.TimeFormat))
		h.setVersionID(q, hdr, "x-amz-version-id", q.bucket, v)
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	var off, n int64
	var partial bool
	if part > 0 {
		var count int
		if off, n, count, err = partRange(v, part); err != nil {
			return err
		}
		if count > 0 {
			hdr.Set("x-amz-mp-parts-count", strconv.Itoa(count))
		}
		// A part is a range, even the one part, all of it, of an object
		// not uploaded in parts (as S3 answers: 206 and Content-Range).
		partial = v.Size > 0
	} else if off, n, partial, err = parseRange(q.r.Header.Get("Range"), v.Size); err != nil {
		hdr.Set("Content-Range", fmt.Sprintf("bytes */%d", v.Size))
		return err
	}
	if !partial {
		off, n = 0, v.Size
	}
	// The body opens before any header of the object is set: a chunk
	// store that cannot answer is then an error response of its own, not
	// one carrying the object's length and checksums.
	var body io.ReadCloser
	if withBody {
		if body, _, err = h.svc.Open(q.ctx, v, off, n); err != nil {
			return err
		}
		defer body.Close()
	}
	status := http.StatusOK
	if partial {
		status = http.StatusPartialContent
		hdr.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", off, off+n-1, v.Size))
	} else if strings.EqualFold(q.r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") {
		// Sums cover the whole object: S3 sends them only for whole reads.
		setChecksumHeaders(hdr, v.Checksums)
	}
	setVersionHeaders(hdr, v)
	h.setVersionID(q, hdr, "x-amz-version-id", q.bucket, v)
	if versionID == "" {
		h.setExpiration(q, hdr, v)
	}
	applyOverrides(hdr, q)
	hdr.Set("Accept-Ranges", "bytes")
	hdr.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(status)
	if !withBody {
		return nil
	}
	if _, err := io.Copy(w, body); err != nil {
		return fmt.Errorf("sending %s/%s: %w: %w", q.bucket, q.key, errAborted, err)
	}
	return nil
}

// headVersion returns the version of q's key that a read addresses: the
// latest, or versionID. A delete marker is shown by its id in hdr, whether
// it hides the key (404) or was asked for by version id (405).
func (h *Handler) headVersion(q *request, hdr http.Header, versionID string) (*meta.Version, error) {
	v, err := h.svc.Head(q.ctx, q.bucket, q.key, versionID)
	if err != nil && v != nil && v.DeleteMarker {
		hdr.Set("x-amz-delete-marker", "true")
		hdr.Set("x-amz-version-id", v.WireID())
		if errors.Is(err, meta.ErrDeleteMarker) {
			hdr.Set("Last-Modified", v.LastModified().Format(http.TimeFormat))
			hdr.Set("Allow", "DELETE")
		}
	}
	return v, err
}

// partRange locates part number of v: a multipart upload's part as its
// manifest records the parts' sizes, or for any other object the whole
// object as part 1. count is the number of parts, 0 when v was not
// uploaded in parts.
func partRange(v *meta.Version, number int32) (off, n int64, count int, err error) {
	sizes, err := partSizes(v)
	if err != nil {
		return 0, 0, 0, err
	}
	count = len(sizes)
	if count == 0 {
		sizes = []int64{v.Size}
	}
	if int(number) > len(sizes) {
		return 0, 0, 0, errInvalidPartNumber
	}
	for _, s := range sizes[:number-1] {
		off += s
	}
	return off, sizes[number-1], count, nil
}

// partSizes returns the sizes of v's parts, in order, as its manifest
// records them; none when v was not uploaded in parts.
func partSizes(v *meta.Version) ([]int64, error) {
	m, err := data.DecodeManifest(v.Manifest)
	if err != nil {
		return nil, fmt.Errorf("version %s: %w", v.WireID(), err)
	}
	return m.GetParts(), nil
}

// versionParam returns the versionId query parameter; present but empty
// is an error, as in S3.
func versionParam(q *request) (string, error) {
	v, ok := q.query["versionId"]
	if !ok {
		return "", nil
	}
	if v[0] == "" {
		return "", errInvalidArgument.with("Version id cannot be the empty string.")
	}
	return v[0], nil
}

// setVersionID sets header (x-amz-version-id, or the copy source's) to
// v's id as S3 shows it: a real version id always, "null" only in a
// bucket that has had versioning enabled, nothing in one that never had.
func (h *Handler) setVersionID(q *request, hdr http.Header, header, bucket string, v *meta.Version) {
	if v.Null {
		b, err := h.svc.Bucket(q.ctx, bucket)
		if err != nil || b.Versioning == meta.Unversioned {
			return
		}
	}
	hdr.Set(header, v.WireID())
}

// checkWriteHeaders refuses writes that ask for features not implemented.
func checkWriteHeaders(hdr http.Header) error {
	if err := rejectHeaders(hdr, unsupportedWriteHeaders...); err != nil {
		return err
	}
	return checkACL(hdr)
}

// declaredBody checks what a request says of the object body it carries:
// its Content-MD5, and a length within what one PUT or part may store.
func declaredBody(q *request) (md5sum []byte, size int64, err error) {
	md5sum, err = contentMD5(q.r.Header)
	if err != nil {
		return nil, 0, err
	}
	if size = q.auth.DecodedLength; size > maxPutSize {
		return nil, 0, errEntityTooLarge
	}
	return md5sum, size, nil
}

func (h *Handler) putObject(w http.ResponseWriter, q *request) error {
	if _, ok := q.r.Header["X-Amz-Copy-Source"]; ok {
		q.op = "CopyObject"
		return h.copyObject(w, q)
	}
	if err := checkWriteHeaders(q.r.Header); err != nil {
		return err
	}
	attrs, err := requestAttrs(q)
	if err != nil {
		return err
	}
	md5sum, size, err := declaredBody(q)
	if err != nil {
		return err
	}
	check, err := writeCondition(q.r.Header)
	if err != nil {
		return err
	}
	body, sum, err := checksumBody(q, q.auth.Body, size)
	if err != nil {
		return err
	}
	release, err := h.acquireWrite(q)
	if err != nil {
		return err
	}
	defer release()
	br := &bodyReader{r: body}
	v, err := h.svc.Put(q.ctx, q.bucket, q.key, br, object.PutOptions{Attrs: attrs, Size: size, MD5: md5sum, Check: check,
		Finish: func(v *meta.Version) (err error) {
			v.Checksums, err = sum.record(v.Checksums)
			return err
		}})
	if err != nil {
		return br.cause(err)
	}
	hdr := w.Header()
	hdr.Set("ETag", `"`+v.ETag+`"`)
	h.setVersionID(q, hdr, "x-amz-version-id", q.bucket, v)
	h.setExpiration(q, hdr, v)
	setChecksumHeaders(hdr, v.Checksums)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) deleteObject(w http.ResponseWriter, q *request) error {
	versionID, err := versionParam(q)
	if err != nil {
		return err
	}
	res, err := h.deleteOne(q, q.key, versionID)
	if err != nil {
		return err
	}
	if res.VersionID != "" {
		w.Header().Set("x-amz-version-id", res.VersionID)
	}
	if res.DeleteMarker {
		w.Header().Set("x-amz-delete-marker", "true")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// deleteOne deletes a key or one of its versions. Deleting what does not
// exist succeeds, as in S3: the outcome the client asked for holds.
func (h *Handler) deleteOne(q *request, key, versionID string) (object.DeleteResult, error) {
	res, err := h.svc.Delete(q.ctx, q.bucket, key, object.DeleteOptions{VersionID: versionID, Owner: q.owner})
	if meta.IsNotFound(err) {
		return object.DeleteResult{VersionID: versionID}, nil
	}
	return res, err
}

// bodyReader remembers why reading a request body failed. When a body
// breaks off, the core may first notice the request's context ending and
// report that; the client is owed the body's own error (IncompleteBody,
// BadDigest, SignatureDoesNotMatch).
type bodyReader struct {
	r   io.Reader
	err error
}

// cause is the error to answer a failed write with: the body's own, if
// reading it failed, else the core's err.
func (b *bodyReader) cause(err error) error {
	if b.err != nil {
		return b.err
	}
	return err
}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}
