package s3

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"strings"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// Multipart uploads are kept by the core in the meta store; parts stream
// to chunks as PutObject bodies do, and Complete joins their chunks
// without copying a byte.

// maxCompleteBody bounds CompleteMultipartUpload's body: 10,000 parts,
// each with an ETag and a checksum, fit with room for white space.
const maxCompleteBody = 4 << 20

// maxListParts is the most parts or uploads one listing page shows.
const maxListParts = 1000

type initiateResult struct {
	XMLName  xml.Name `xml:"InitiateMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Bucket   string
	Key      string
	UploadID string `xml:"UploadId"`
}

// createUpload starts an upload whose completed version gets the
// attributes of this request, as a PutObject's would.
func (h *Handler) createUpload(w http.ResponseWriter, q *request) error {
	if err := checkWriteHeaders(q.r.Header); err != nil {
		return err
	}
	attrs, err := requestAttrs(q)
	if err != nil {
		return err
	}
	o := object.UploadOptions{Attrs: attrs}
	alg, typ, err := uploadChecksumRequest(q.r.Header)
	if err != nil {
		return err
	}
	if alg != "" {
		o.Checksums = map[string]string{alg: ""}
		o.FullObjectChecksum = typ == typeFullObject
		w.Header().Set("x-amz-checksum-algorithm", alg)
		w.Header().Set("x-amz-checksum-type", typ)
	}
	u, err := h.svc.CreateUpload(q.ctx, q.bucket, q.key, o)
	if err != nil {
		return err
	}
	return writeXML(w, http.StatusOK, initiateResult{Xmlns: xmlns, Bucket: q.bucket, Key: q.key, UploadID: u.ID})
}

// uploadChecksumRequest reads the checksum algorithm and type a
// CreateMultipartUpload asks for. As in S3, CRC32 and CRC32C may be of
// either type (COMPOSITE by default), CRC64NVME only FULL_OBJECT and the
// SHA algorithms only COMPOSITE.
func uploadChecksumRequest(h http.Header) (alg, typ string, err error) {
	name, typ := h.Get("X-Amz-Checksum-Algorithm"), strings.ToUpper(h.Get("X-Amz-Checksum-Type"))
	if name == "" {
		if typ != "" {
			return "", "", errInvalidRequest.with("The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
		}
		return "", "", nil
	}
	a, ok := checksumByName(name)
	if !ok {
		return "", "", errInvalidRequest.with("Value for x-amz-checksum-algorithm header is invalid.")
	}
	switch {
	case typ == "" && a.name == "CRC64NVME":
		typ = typeFullObject
	case typ == "":
		typ = typeComposite
	case typ != typeComposite && typ != typeFullObject:
		return "", "", errInvalidRequest.with("Value for x-amz-checksum-type header is invalid.")
	case typ == typeFullObject && a.crc == nil, typ == typeComposite && a.name == "CRC64NVME":
		return "", "", errInvalidRequest.with("The %s checksum type cannot be used with the %s checksum algorithm.", typ, strings.ToLower(a.name))
	}
	return a.name, typ, nil
}

// uploadChecksum is the algorithm an upload was created with ("" if none)
// and its checksum type.
func uploadChecksum(u *meta.Upload) (alg, typ string) {
	for name := range u.Template.Checksums {
		if u.FullObjectChecksum {
			return name, typeFullObject
		}
		return name, typeComposite
	}
	return "", ""
}

// partNumberParam reads partNumber; 0 when absent.
func partNumberParam(q *request) (int32, error) {
	n, err := intParam(q, "partNumber", 0, 1, meta.MaxParts)
	return int32(n), err
}

// uploadPart stores one part, streamed to chunks like a PutObject body
// and verified the same ways (Content-MD5, x-amz-checksum-*, aws-chunked
// signatures), or with x-amz-copy-source takes it from an object.
func (h *Handler) uploadPart(w http.ResponseWriter, q *request) error {
	number, err := partNumberParam(q)
	if err != nil {
		return err
	}
	if number == 0 {
		return errInvalidArgument.with("UploadPart needs a partNumber.")
	}
	uploadID := q.query.Get("uploadId")
	if _, ok := q.r.Header["X-Amz-Copy-Source"]; ok {
		q.op = "UploadPartCopy"
		return h.uploadPartCopy(w, q, uploadID, number)
	}
	if err := checkWriteHeaders(q.r.Header); err != nil {
		return err
	}
	md5sum, size, err := declaredBody(q)
	if err != nil {
		return err
	}
	// Refuse a part of an upload that is gone before reading its body.
	u, err := h.svc.Upload(q.ctx, q.bucket, q.key, uploadID)
	if err != nil {
		return err
	}
	body, sum, err := checksumBody(q, q.auth.Body, size)
	if err != nil {
		return err
	}
	if want, typ := uploadChecksum(u); want != "" {
		switch {
		case sum == nil && typ == typeFullObject:
			// The whole object's CRC is made from every part's: compute
			// the one the client left out.
			alg, _ := checksumByName(want)
			body, sum = computeSum(alg, body)
		case sum == nil:
			return errInvalidRequest.with("Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: null", strings.ToLower(want))
		case sum.alg.name != want:
			return errInvalidRequest.with("Checksum Type mismatch occurred, expected checksum Type: %s, actual checksum Type: %s", strings.ToLower(want), strings.ToLower(sum.alg.name))
		}
	}
	release, err := h.acquireWrite(q)
	if err != nil {
		return err
	}
	defer release()
	br := &bodyReader{r: body}
	p, err := h.svc.UploadPart(q.ctx, q.bucket, q.key, uploadID, number, br, object.PartOptions{Size: size, MD5: md5sum,
		Finish: func(p *meta.Part) (err error) {
			p.Checksums, err = sum.record(p.Checksums)
			return err
		}})
	if err != nil {
		return br.cause(err)
	}
	hdr := w.Header()
	hdr.Set("ETag", `"`+p.ETag+`"`)
	setChecksumHeaders(hdr, p.Checksums)
	w.WriteHeader(http.StatusOK)
	return nil
}

type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	ETag         string
	LastModified string
}

// uploadPartCopy makes a part of a source object's bytes, or of the
// x-amz-copy-source-range of them, sharing the source's chunks.
func (h *Handler) uploadPartCopy(w http.ResponseWriter, q *request, uploadID string, number int32) error {
	hdr := q.r.Header
	if err := checkWriteHeaders(hdr); err != nil {
		return err
	}
	srcBucket, srcKey, srcVersion, err := h.copySource(q)
	if err != nil {
		return err
	}
	off, n, ranged, err := parseCopyRange(hdr.Get("X-Amz-Copy-Source-Range"))
	if err != nil {
		return err
	}
	pre := readPreconditions(hdr, "X-Amz-Copy-Source-")
	src := object.CopySource{Bucket: srcBucket, Key: srcKey, VersionID: srcVersion, Offset: off, Length: n,
		Check: func(s *meta.Version) error {
			if pre.evaluate(s) != 0 {
				return errPreconditionFailed
			}
			if ranged && off+n > s.Size {
				return errInvalidArgument.with("Range specified is not valid for source object of size: %d", s.Size)
			}
			if !ranged && s.Size > maxPutSize {
				return errInvalidRequest.with("The specified copy source is larger than the maximum allowable size for a copy source: %d", int64(maxPutSize))
			}
			return nil
		}}
	p, v, err := h.svc.CopyPart(q.ctx, q.bucket, q.key, uploadID, number, src)
	if err != nil {
		return copyError(err)
	}
	h.setVersionID(q, w.Header(), "x-amz-copy-source-version-id", srcBucket, v)
	return writeXML(w, http.StatusOK, copyPartResult{Xmlns: xmlns, ETag: `"` + p.ETag + `"`, LastModified: isoTime(p.Modified)})
}

// parseCopyRange reads x-amz-copy-source-range, "bytes=first-last" with
// both ends given. Without one, n is -1: the whole source.
func parseCopyRange(h string) (off, n int64, ranged bool, err error) {
	if h == "" {
		return 0, -1, false, nil
	}
	bad := errInvalidArgument.with("The x-amz-copy-source-range value must be of the form bytes=first-last " +
		"where first and last are the zero-based offsets of the first and last bytes to copy")
	spec, ok := strings.CutPrefix(h, "bytes=")
	if !ok {
		return 0, 0, false, bad
	}
	a, b, _ := strings.Cut(spec, "-")
	first, ok1 := digits(a)
	last, ok2 := digits(b)
	if !ok1 || !ok2 || last < first {
		return 0, 0, false, bad
	}
	if last-first+1 > maxPutSize {
		return 0, 0, false, errInvalidArgument.with("The range of a part copy may be %d bytes at most.", int64(maxPutSize))
	}
	return first, last - first + 1, true, nil
}

// completeRequest is CompleteMultipartUpload's body. A part is
// identified by its number and ETag (the MD5 of its bytes); a checksum
// listed with it must be the one the part was stored with.
type completeRequest struct {
	XMLName xml.Name `xml:"CompleteMultipartUpload"`
	Parts   []struct {
		PartNumber *int32
		ETag       *string
		checksumFields
	} `xml:"Part"`
}

type completeResult struct {
	XMLName  xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns    string   `xml:"xmlns,attr"`
	Location string
	Bucket   string
	Key      string
	ETag     string
	checksumFields
}

// completeUpload joins the listed parts into a new version. The core
// checks the list and the write condition, and answers a Complete
// repeated after success with the version it made.
func (h *Handler) completeUpload(w http.ResponseWriter, q *request) error {
	size := int64(-1)
	if v := q.r.Header.Get("X-Amz-Mp-Object-Size"); v != "" {
		n, ok := digits(v)
		if !ok {
			return errInvalidArgument.with("The x-amz-mp-object-size header must be a non-negative integer.")
		}
		size = n
	}
	check, err := writeCondition(q.r.Header)
	if err != nil {
		return err
	}
	// The x-amz-checksum-* headers of a Complete are the object's sums
	// (checked in completedSums), not its body's.
	body, err := readChecked(q, q.auth.Body, maxCompleteBody)
	if err != nil {
		return err
	}
	var req completeRequest
	if err := decodeXML(body, &req); err != nil {
		return err
	}
	if len(req.Parts) == 0 {
		return errMalformedXML.with("A CompleteMultipartUpload request must list at least one part.")
	}
	parts := make([]object.CompletedPart, len(req.Parts))
	for i, p := range req.Parts {
		if p.PartNumber == nil || p.ETag == nil {
			return errMalformedXML.with("Each Part needs a PartNumber and an ETag.")
		}
		parts[i] = object.CompletedPart{Number: *p.PartNumber, ETag: strings.Trim(strings.TrimSpace(*p.ETag), `"`)}
	}
	v, err := h.svc.CompleteUpload(q.ctx, q.bucket, q.key, q.query.Get("uploadId"), parts, &object.CompleteOptions{Check: check,
		Finish: func(u *meta.Upload, v *meta.Version, stored []*meta.Part) error {
			if size >= 0 && size != v.Size {
				return errInvalidRequest.with("The provided 'x-amz-mp-object-size' header value %d does not match what was computed: %d", size, v.Size)
			}
			listed := make([]map[string]string, len(req.Parts))
			for i, p := range req.Parts {
				listed[i] = p.checksumFields.sums()
			}
			sums, err := completedSums(q.r.Header, u, stored, listed)
			v.Checksums = sums
			return err
		}})
	if err != nil {
		return err
	}
	h.setVersionID(q, w.Header(), "x-amz-version-id", q.bucket, v)
	h.setExpiration(q, w.Header(), v)
	scheme := "http"
	if q.r.TLS != nil {
		scheme = "https"
	}
	return writeXML(w, http.StatusOK, completeResult{
		Xmlns:          xmlns,
		Location:       scheme + "://" + q.r.Host + "/" + q.bucket + "/" + sigv4.URIEncode(q.key, false),
		Bucket:         q.bucket,
		Key:            q.key,
		ETag:           `"` + v.ETag + `"`,
		checksumFields: checksumXML(v.Checksums),
	})
}

func (h *Handler) abortUpload(w http.ResponseWriter, q *request) error {
	if err := h.svc.AbortUpload(q.ctx, q.bucket, q.key, q.query.Get("uploadId")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// completedSums checks the checksums a Complete lists for the parts, and
// the sum of the whole object its x-amz-checksum-* header may carry,
// against the parts stored, and returns the sums of the completed object.
// As in S3: a listed part sum that is not the stored one makes the part
// InvalidPart; an upload created without an algorithm gets no sum (its
// parts' sums, if any, are checked and not used); a COMPOSITE upload needs
// every part's sum listed.
// Unlike S3, a part made by UploadPartCopy has no sum (its bytes are
// shared, never read), and an object with such a part gets none either.
func completedSums(hdr http.Header, u *meta.Upload, stored []*meta.Part, listed []map[string]string) (map[string]string, error) {
	name, typ := uploadChecksum(u)
	for i, p := range stored {
		for alg, v := range listed[i] {
			if name != "" && alg != name || v != p.Checksums[alg] {
				return nil, errInvalidPart.with("The %s checksum listed for part %d is not the part's.", strings.ToLower(alg), p.Number)
			}
		}
	}
	if name == "" {
		return nil, nil // S3 ignores an object sum sent for such an upload
	}
	if t := hdr.Get("X-Amz-Checksum-Type"); t != "" && !strings.EqualFold(t, typ) {
		return nil, errInvalidRequest.with("The upload was created using the %s checksum mode. The complete request must use the same checksum mode.", typ)
	}
	alg, _ := checksumByName(name)
	sums, sizes := make([]string, len(stored)), make([]int64, len(stored))
	copied := false
	for i, p := range stored {
		if sums[i], sizes[i] = p.Checksums[name], p.Size; sums[i] == "" {
			copied = true
			continue
		}
		if typ == typeComposite && listed[i][name] == "" {
			return nil, errInvalidRequest.with("The upload was created using a %s checksum. The complete request must include the checksum for each part. It was missing for part %d in the request.", strings.ToLower(name), p.Number)
		}
	}
	if copied {
		return nil, nil
	}
	sum, err := partsSum(alg, typ == typeFullObject, sums, sizes)
	if err != nil {
		return nil, err
	}
	for _, a := range checksumAlgs {
		v := hdr.Get(a.header())
		if v != "" && (a.name != name || v != sum && v+fmt.Sprintf("-%d", len(stored)) != sum) {
			return nil, errBadDigest.with("The %s you specified did not match the calculated checksum.", strings.ToLower(a.name))
		}
	}
	return map[string]string{name: sum}, nil
}

type listPartsResult struct {
	XMLName              xml.Name `xml:"ListPartsResult"`
	Xmlns                string   `xml:"xmlns,attr"`
	Bucket               string
	Key                  string
	UploadID             string `xml:"UploadId"`
	PartNumberMarker     int
	NextPartNumberMarker int
	MaxParts             int
	IsTruncated          bool
	EncodingType         string `xml:",omitempty"`
	Initiator            *Owner
	Owner                *Owner
	StorageClass         string
	ChecksumAlgorithm    string      `xml:",omitempty"`
	ChecksumType         string      `xml:",omitempty"`
	Parts                []partEntry `xml:"Part"`
}

type partEntry struct {
	PartNumber   int32
	LastModified string
	ETag         string
	Size         int64
	checksumFields
}

// listParts lists an upload's parts, max-parts at a time, numbered above
// part-number-marker.
func (h *Handler) listParts(w http.ResponseWriter, q *request) error {
	enc, err := listEncoding(q)
	if err != nil {
		return err
	}
	limit, err := intParam(q, "max-parts", maxListParts, 0, int(^uint32(0)>>1))
	if err != nil {
		return err
	}
	limit = min(limit, maxListParts)
	marker, err := intParam(q, "part-number-marker", 0, 0, meta.MaxParts)
	if err != nil {
		return err
	}
	uploadID := q.query.Get("uploadId")
	u, err := h.svc.Upload(q.ctx, q.bucket, q.key, uploadID)
	if err != nil {
		return err
	}
	// One part more than the page tells whether it is the last.
	parts, err := h.svc.Parts(q.ctx, q.bucket, q.key, uploadID, int32(marker), limit+1)
	if err != nil {
		return err
	}
	alg, typ := uploadChecksum(u)
	res := listPartsResult{
		Xmlns:             xmlns,
		Bucket:            q.bucket,
		Key:               enc.apply(q.key),
		UploadID:          uploadID,
		PartNumberMarker:  marker,
		MaxParts:          limit,
		IsTruncated:       len(parts) > limit,
		EncodingType:      enc.name,
		Initiator:         h.ownerOf(q, u.Template.Owner),
		Owner:             h.ownerOf(q, u.Template.Owner),
		StorageClass:      storageClass(u.Template),
		ChecksumAlgorithm: alg,
		ChecksumType:      typ,
	}
	for _, p := range parts[:min(len(parts), limit)] {
		sums := checksumXML(p.Checksums)
		sums.ChecksumType = ""
		res.Parts = append(res.Parts, partEntry{PartNumber: p.Number, LastModified: isoTime(p.Modified),
			ETag: `"` + p.ETag + `"`, Size: p.Size, checksumFields: sums})
		res.NextPartNumberMarker = int(p.Number)
	}
	return writeXML(w, http.StatusOK, res)
}

type listUploadsResult struct {
	XMLName            xml.Name `xml:"ListMultipartUploadsResult"`
	Xmlns              string   `xml:"xmlns,attr"`
	Bucket             string
	KeyMarker          string
	UploadIDMarker     string `xml:"UploadIdMarker"`
	NextKeyMarker      string
	NextUploadIDMarker string `xml:"NextUploadIdMarker"`
	Prefix             string
	Delimiter          string `xml:",omitempty"`
	MaxUploads         int
	IsTruncated        bool
	EncodingType       string        `xml:",omitempty"`
	Uploads            []uploadEntry `xml:"Upload"`
	CommonPrefixes     []commonPrefix
}

type uploadEntry struct {
	Key               string
	UploadID          string `xml:"UploadId"`
	Initiator         *Owner
	Owner             *Owner
	StorageClass      string
	Initiated         string
	ChecksumAlgorithm string `xml:",omitempty"`
	ChecksumType      string `xml:",omitempty"`
}

// pastPrefix, appended to a key prefix, sorts after every key that has
// that prefix: keys are valid UTF-8 of at most meta.MaxKeyLen bytes, and
// U+10FFFF is the largest code point, so its UTF-8 form the largest
// 4-byte sequence.
var pastPrefix = strings.Repeat("\U0010FFFF", meta.MaxKeyLen/4+1)

// listUploads lists the uploads in progress by key, then initiation, in
// pages of max-uploads entries; with a delimiter the keys under one
// common prefix count as one entry, shown once.
func (h *Handler) listUploads(w http.ResponseWriter, q *request) error {
	enc, err := listEncoding(q)
	if err != nil {
		return err
	}
	limit, err := intParam(q, "max-uploads", maxListParts, 0, int(^uint32(0)>>1))
	if err != nil {
		return err
	}
	limit = min(limit, maxListParts)
	prefix, delim := q.query.Get("prefix"), q.query.Get("delimiter")
	keyMarker, idMarker := q.query.Get("key-marker"), q.query.Get("upload-id-marker")
	if keyMarker == "" {
		idMarker = "" // S3 ignores an upload-id-marker without a key-marker
	}
	// rollup is the common prefix key rolls up into; "" when none.
	rollup := func(key string) string {
		rest, ok := strings.CutPrefix(key, prefix)
		if i := strings.Index(rest, delim); ok && delim != "" && i >= 0 {
			return prefix + rest[:i+len(delim)]
		}
		return ""
	}
	o := meta.UploadListOptions{Prefix: prefix, AfterKey: keyMarker, AfterID: idMarker}
	if keyMarker != "" && rollup(keyMarker) == keyMarker {
		// The marker is a common prefix a previous page ended on.
		o.AfterKey, o.AfterID = keyMarker+pastPrefix, ""
	}
	res := listUploadsResult{
		Xmlns:          xmlns,
		Bucket:         q.bucket,
		KeyMarker:      enc.apply(keyMarker),
		UploadIDMarker: idMarker,
		Prefix:         enc.apply(prefix),
		Delimiter:      enc.apply(delim),
		MaxUploads:     limit,
		EncodingType:   enc.name,
	}
	if limit == 0 {
		_, err := h.svc.Bucket(q.ctx, q.bucket)
		if err != nil {
			return err
		}
		return writeXML(w, http.StatusOK, res)
	}
	entries := 0
	var lastKey, lastID string
	for {
		o.Limit = limit + 1 - entries
		page, err := h.svc.ListUploads(q.ctx, q.bucket, o)
		if err != nil {
			return err
		}
		skipped := false
		for _, u := range page {
			if entries == limit {
				res.IsTruncated = true
				break
			}
			entries++
			if cp := rollup(u.Key); cp != "" {
				res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{enc.apply(cp)})
				lastKey, lastID = cp, ""
				// Go on past every key under it.
				o.AfterKey, o.AfterID, skipped = cp+pastPrefix, "", true
				break
			}
			alg, typ := uploadChecksum(u)
			res.Uploads = append(res.Uploads, uploadEntry{
				Key:               enc.apply(u.Key),
				UploadID:          u.ID,
				Initiator:         h.ownerOf(q, u.Template.Owner),
				Owner:             h.ownerOf(q, u.Template.Owner),
				StorageClass:      storageClass(u.Template),
				Initiated:         isoTime(u.Initiated),
				ChecksumAlgorithm: alg,
				ChecksumType:      typ,
			})
			lastKey, lastID = u.Key, u.ID
			o.AfterKey, o.AfterID = u.Key, u.ID
		}
		if res.IsTruncated || !skipped && len(page) < o.Limit {
			break
		}
	}
	if res.IsTruncated {
		res.NextKeyMarker, res.NextUploadIDMarker = enc.apply(lastKey), lastID
	}
	return writeXML(w, http.StatusOK, res)
}
