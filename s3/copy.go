package s3

import (
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// copyObjectResult is CopyObject's response body.
type copyObjectResult struct {
	XMLName      xml.Name `xml:"CopyObjectResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	ETag         string
	LastModified string
	checksumFields
}

// copyObject is a PUT with x-amz-copy-source: a new version that shares
// the source version's chunks, whatever its size (object.Copy).
func (h *Handler) copyObject(w http.ResponseWriter, q *request) error {
	hdr := q.r.Header
	if err := checkWriteHeaders(hdr); err != nil {
		return err
	}
	srcBucket, srcKey, srcVersion, err := h.copySource(q)
	if err != nil {
		return err
	}
	directive := hdr.Get("X-Amz-Metadata-Directive")
	switch directive {
	case "", "COPY", "REPLACE":
	default:
		return errInvalidArgument.with("Unknown metadata directive %q.", directive)
	}
	attrs, err := requestAttrs(q)
	if err != nil {
		return err
	}
	newClass := hdr.Get("X-Amz-Storage-Class") != ""
	if srcBucket == q.bucket && srcKey == q.key && srcVersion == "" && directive != "REPLACE" && !newClass {
		return errInvalidRequest.with("This copy request is illegal because it is trying to copy an object to itself " +
			"without changing the object's metadata, storage class, website redirect location or encryption attributes.")
	}
	check, err := writeCondition(hdr)
	if err != nil {
		return err
	}
	pre := readPreconditions(hdr, "X-Amz-Copy-Source-")
	var sumAlg checksumAlg
	if name := hdr.Get("X-Amz-Checksum-Algorithm"); name != "" {
		var ok bool
		if sumAlg, ok = checksumByName(name); !ok {
			return errInvalidRequest.with("Value for x-amz-checksum-algorithm header is invalid.")
		}
	}
	var src *meta.Version
	opts := object.CopyOptions{SrcVersionID: srcVersion, Owner: q.owner, Check: check}
	if directive == "REPLACE" || newClass {
		opts.Replace = new(object.Attrs)
	}
	opts.CheckSource = func(s *meta.Version) error {
		src = s
		if pre.evaluate(s) != 0 {
			return errPreconditionFailed
		}
		// The copy shares the source's bytes and sums; a sum the source
		// lacks would mean reading every byte.
		if v := s.Checksums[sumAlg.name]; sumAlg.name != "" && (v == "" || sumType(v) != typeFullObject) {
			return errNotImplemented.with("A copy computing a new %s checksum is not implemented: the source has no %[1]s checksum of its whole bytes.", sumAlg.name)
		}
		if opts.Replace != nil {
			*opts.Replace = copyAttrs(s, attrs, directive == "REPLACE")
		}
		return nil
	}
	v, err := h.svc.Copy(q.ctx, srcBucket, srcKey, q.bucket, q.key, opts)
	if err != nil {
		return copyError(err)
	}
	h.setVersionID(q, w.Header(), "x-amz-version-id", q.bucket, v)
	h.setExpiration(q, w.Header(), v)
	if src != nil {
		h.setVersionID(q, w.Header(), "x-amz-copy-source-version-id", srcBucket, src)
	}
	return writeXML(w, http.StatusOK, copyObjectResult{
		Xmlns:          xmlns,
		ETag:           `"` + v.ETag + `"`,
		LastModified:   isoTime(v.LastModified()),
		checksumFields: checksumXML(v.Checksums),
	})
}

// copyAttrs builds the attributes of a copy that changes something: with
// REPLACE the request's content headers, metadata and storage class; with
// COPY the source's, under a new storage class. Checksums and POSIX
// attributes describe the bytes and the file, so they follow the source.
func copyAttrs(src *meta.Version, req object.Attrs, replace bool) object.Attrs {
	a := req
	if !replace {
		a.Content, a.UserMeta = src.Content, src.UserMeta
	}
	a.Checksums, a.POSIX = src.Checksums, src.POSIX
	return a
}

// copySource reads x-amz-copy-source and checks that the requester may
// read the source bucket.
func (h *Handler) copySource(q *request) (bucket, key, versionID string, err error) {
	bucket, key, versionID, err = parseCopySource(q.r.Header.Get("X-Amz-Copy-Source"))
	if err == nil {
		err = h.authorize(q, bucket)
	}
	return bucket, key, versionID, err
}

// copyError is how a copy that failed on its source answers: a delete
// marker named by version id is a bad request, not a 405 as for a GET.
func copyError(err error) error {
	if errors.Is(err, meta.ErrDeleteMarker) {
		return errInvalidRequest.with("The source of a copy request may not specifically refer to a delete marker by version id.")
	}
	return err
}

// parseCopySource splits x-amz-copy-source, "[/]bucket/key[?versionId=v]"
// with the key URL-encoded.
func parseCopySource(s string) (bucket, key, versionID string, err error) {
	bad := errInvalidArgument.with("Copy Source must mention the source bucket and key: sourcebucket/sourcekey.")
	path, rawQuery, _ := strings.Cut(strings.TrimPrefix(s, "/"), "?")
	path, perr := url.PathUnescape(path)
	if perr != nil {
		return "", "", "", bad
	}
	bucket, key, _ = strings.Cut(path, "/")
	if bucket == "" || key == "" {
		return "", "", "", bad
	}
	if rawQuery == "" {
		return bucket, key, "", nil
	}
	params, qerr := url.ParseQuery(rawQuery)
	v, ok := params["versionId"]
	if qerr != nil || len(params) != 1 || !ok || v[0] == "" {
		return "", "", "", errInvalidArgument.with("The copy source may carry only a non-empty versionId.")
	}
	return bucket, key, v[0], nil
}
