package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"
)

// objectAttributes are the names x-amz-object-attributes may list.
var objectAttributes = map[string]bool{"ETag": true, "Checksum": true, "ObjectParts": true, "StorageClass": true, "ObjectSize": true}

type objectAttributesResult struct {
	XMLName      xml.Name           `xml:"GetObjectAttributesResponse"`
	Xmlns        string             `xml:"xmlns,attr"`
	ETag         string             `xml:",omitempty"`
	Checksum     *checksumFields    `xml:",omitempty"`
	ObjectParts  *objectPartsResult `xml:",omitempty"`
	StorageClass string             `xml:",omitempty"`
	ObjectSize   *int64             `xml:",omitempty"`
}

// objectPartsResult counts a multipart object's parts. S3 lists them
// (Part elements, with markers) only for objects that keep a checksum per
// part, which a completed version here does not.
type objectPartsResult struct {
	PartsCount int
}

// getObjectAttributes answers GetObjectAttributes: in one XML body, the
// attributes of a version that x-amz-object-attributes names, which HEAD
// and ListParts would otherwise tell. As in S3 the ETag is unquoted, and
// the response carries no object metadata headers.
func (h *Handler) getObjectAttributes(w http.ResponseWriter, q *request) error {
	want := map[string]bool{}
	for _, line := range q.r.Header.Values("X-Amz-Object-Attributes") {
		for _, name := range strings.Split(line, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if !objectAttributes[name] {
					return errInvalidArgument.with("Invalid attribute name specified: %q.", name)
				}
				want[name] = true
			}
		}
	}
	if len(want) == 0 {
		return errInvalidArgument.with("The x-amz-object-attributes header specifying the attributes to be retrieved is either missing or empty.")
	}
	for _, name := range []string{"X-Amz-Max-Parts", "X-Amz-Part-Number-Marker"} {
		if s := q.r.Header.Get(name); s != "" {
			if n, err := strconv.Atoi(s); err != nil || n < 0 {
				return errInvalidArgument.with("%s must be a non-negative integer, not %q.", name, s)
			}
		}
	}
	versionID, err := versionParam(q)
	if err != nil {
		return err
	}
	hdr := w.Header()
	v, err := h.headVersion(q, hdr, versionID)
	if err != nil {
		return err
	}
	res := objectAttributesResult{Xmlns: xmlns}
	if want["ETag"] {
		res.ETag = v.ETag
	}
	if want["Checksum"] && len(v.Checksums) > 0 {
		sums := checksumXML(v.Checksums)
		res.Checksum = &sums
	}
	if want["ObjectParts"] {
		sizes, err := partSizes(v)
		if err != nil {
			return err
		}
		if len(sizes) > 0 {
			res.ObjectParts = &objectPartsResult{PartsCount: len(sizes)}
		}
	}
	if want["StorageClass"] {
		res.StorageClass = storageClass(v)
	}
	if want["ObjectSize"] {
		res.ObjectSize = &v.Size
	}
	hdr.Set("Last-Modified", v.LastModified().Format(http.TimeFormat))
	h.setVersionID(q, hdr, "x-amz-version-id", q.bucket, v)
	return writeXML(w, http.StatusOK, res)
}
