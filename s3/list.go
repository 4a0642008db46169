package s3

import (
	"encoding/base64"
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/s3/sigv4"
)

// maxBuckets is the largest page ListBuckets returns.
const maxBuckets = 10000

type listAllMyBucketsResult struct {
	XMLName           xml.Name      `xml:"ListAllMyBucketsResult"`
	Xmlns             string        `xml:"xmlns,attr"`
	Owner             *Owner        `xml:"Owner"`
	Buckets           []bucketEntry `xml:"Buckets>Bucket"`
	ContinuationToken string        `xml:",omitempty"`
	Prefix            string        `xml:",omitempty"`
}

type bucketEntry struct {
	Name         string
	CreationDate string
	BucketRegion string
}

// listBuckets lists the buckets the requester owns (the root sees all),
// by name, in pages of max-buckets after continuation-token.
func (h *Handler) listBuckets(w http.ResponseWriter, q *request) error {
	limit, err := intParam(q, "max-buckets", maxBuckets, 1, maxBuckets)
	if err != nil {
		return err
	}
	after, err := decodeToken(q.query.Get("continuation-token"))
	if err != nil {
		return err
	}
	prefix := q.query.Get("prefix")
	all, err := h.svc.Buckets(q.ctx)
	if err != nil {
		return err
	}
	res := listAllMyBucketsResult{Xmlns: xmlns, Owner: h.ownerOf(q, q.owner), Prefix: prefix}
	for _, b := range all {
		if b.Name <= after || !strings.HasPrefix(b.Name, prefix) || q.owner != "" && b.Owner != q.owner {
			continue
		}
		if len(res.Buckets) == limit {
			res.ContinuationToken = encodeToken(res.Buckets[limit-1].Name)
			break
		}
		res.Buckets = append(res.Buckets, bucketEntry{Name: b.Name, CreationDate: isoTime(b.Created), BucketRegion: h.cfg.Region})
	}
	return writeXML(w, http.StatusOK, res)
}

// objectEntry is a key in ListObjects, or a version in ListObjectVersions.
type objectEntry struct {
	XMLName           xml.Name
	Key               string
	VersionID         string `xml:"VersionId,omitempty"`
	IsLatest          *bool  `xml:",omitempty"`
	LastModified      string
	ETag              string `xml:",omitempty"`
	Size              *int64 `xml:",omitempty"`
	StorageClass      string `xml:",omitempty"`
	Owner             *Owner `xml:",omitempty"`
	ChecksumAlgorithm []string
	ChecksumType      string `xml:",omitempty"`
}

type commonPrefix struct {
	Prefix string
}

type listBucketResult struct {
	XMLName               xml.Name `xml:"ListBucketResult"`
	Xmlns                 string   `xml:"xmlns,attr"`
	Name                  string
	Prefix                string
	Marker                *string `xml:",omitempty"` // v1
	NextMarker            string  `xml:",omitempty"` // v1
	ContinuationToken     string  `xml:",omitempty"` // v2
	NextContinuationToken string  `xml:",omitempty"` // v2
	StartAfter            string  `xml:",omitempty"` // v2
	KeyCount              *int    `xml:",omitempty"` // v2
	MaxKeys               int
	Delimiter             string `xml:",omitempty"`
	IsTruncated           bool
	EncodingType          string `xml:",omitempty"`
	Contents              []objectEntry
	CommonPrefixes        []commonPrefix
}

// listObjects serves ListObjects (v1) and, with list-type=2,
// ListObjectsV2, from the core's listing engine.
func (h *Handler) listObjects(w http.ResponseWriter, q *request) error {
	v2 := false
	switch lt := q.query.Get("list-type"); lt {
	case "":
	case "2":
		v2 = true
	default:
		return errInvalidArgument.with("Invalid list-type %q.", lt)
	}
	enc, err := listEncoding(q)
	if err != nil {
		return err
	}
	maxKeys, err := intParam(q, "max-keys", meta.MaxListKeys, 0, int(^uint32(0)>>1))
	if err != nil {
		return err
	}
	// A listing shows attributes only: the inline bytes of small objects
	// are not read.
	o := meta.ListOptions{Prefix: q.query.Get("prefix"), Delimiter: q.query.Get("delimiter"), MaxKeys: maxKeys, Attrs: true}
	res := listBucketResult{
		Xmlns:        xmlns,
		Name:         q.bucket,
		Prefix:       enc.apply(o.Prefix),
		MaxKeys:      min(maxKeys, meta.MaxListKeys),
		Delimiter:    enc.apply(o.Delimiter),
		EncodingType: enc.name,
	}
	var owner func(string) *Owner
	if !v2 || q.query.Get("fetch-owner") == "true" {
		owner = func(id string) *Owner { return h.ownerOf(q, id) }
	}
	if v2 {
		token := q.query.Get("continuation-token")
		res.ContinuationToken = token
		res.StartAfter = enc.apply(q.query.Get("start-after"))
		if o.After, err = decodeToken(token); err != nil {
			return err
		}
		if token == "" {
			o.After = q.query.Get("start-after")
		}
	} else {
		o.After = q.query.Get("marker")
		marker := enc.apply(o.After)
		res.Marker = &marker
	}
	page := &meta.ListResult{}
	if maxKeys > 0 {
		if page, err = h.svc.List(q.ctx, q.bucket, o); err != nil {
			return err
		}
	} else if _, err := h.svc.Bucket(q.ctx, q.bucket); err != nil {
		return err
	}
	res.IsTruncated = page.IsTruncated
	for _, v := range page.Objects {
		res.Contents = append(res.Contents, entry("Contents", v, nil, owner, enc))
	}
	for _, p := range page.CommonPrefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{enc.apply(p)})
	}
	switch {
	case v2:
		n := len(page.Objects) + len(page.CommonPrefixes)
		res.KeyCount = &n
		if page.IsTruncated {
			res.NextContinuationToken = encodeToken(page.Next)
		}
	case page.IsTruncated && o.Delimiter != "":
		// Without a delimiter S3 leaves NextMarker out: the last key is it.
		res.NextMarker = enc.apply(page.Next)
	}
	return writeXML(w, http.StatusOK, res)
}

type listVersionsResult struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	Xmlns               string   `xml:"xmlns,attr"`
	Name                string
	Prefix              string
	KeyMarker           string
	VersionIDMarker     string `xml:"VersionIdMarker"`
	NextKeyMarker       string `xml:",omitempty"`
	NextVersionIDMarker string `xml:"NextVersionIdMarker,omitempty"`
	MaxKeys             int
	Delimiter           string `xml:",omitempty"`
	IsTruncated         bool
	EncodingType        string `xml:",omitempty"`
	// Entries are Version and DeleteMarker elements, in row order.
	Entries        []objectEntry
	CommonPrefixes []commonPrefix
}

func (h *Handler) listObjectVersions(w http.ResponseWriter, q *request) error {
	enc, err := listEncoding(q)
	if err != nil {
		return err
	}
	maxKeys, err := intParam(q, "max-keys", meta.MaxListKeys, 0, int(^uint32(0)>>1))
	if err != nil {
		return err
	}
	o := meta.VersionListOptions{
		Prefix:          q.query.Get("prefix"),
		Delimiter:       q.query.Get("delimiter"),
		KeyMarker:       q.query.Get("key-marker"),
		VersionIDMarker: q.query.Get("version-id-marker"),
		MaxKeys:         maxKeys,
	}
	page := &meta.VersionListResult{}
	if maxKeys > 0 {
		if page, err = h.svc.ListVersions(q.ctx, q.bucket, o); err != nil {
			return err
		}
	} else if _, err := h.svc.Bucket(q.ctx, q.bucket); err != nil {
		return err
	}
	res := listVersionsResult{
		Xmlns:               xmlns,
		Name:                q.bucket,
		Prefix:              enc.apply(o.Prefix),
		KeyMarker:           enc.apply(o.KeyMarker),
		VersionIDMarker:     o.VersionIDMarker,
		NextKeyMarker:       enc.apply(page.NextKeyMarker),
		NextVersionIDMarker: page.NextVersionIDMarker,
		MaxKeys:             min(maxKeys, meta.MaxListKeys),
		Delimiter:           enc.apply(o.Delimiter),
		IsTruncated:         page.IsTruncated,
		EncodingType:        enc.name,
	}
	for _, e := range page.Versions {
		name := "Version"
		if e.DeleteMarker {
			name = "DeleteMarker"
		}
		latest := e.IsLatest
		res.Entries = append(res.Entries, entry(name, e.Version, &latest, func(id string) *Owner { return h.ownerOf(q, id) }, enc))
	}
	for _, p := range page.CommonPrefixes {
		res.CommonPrefixes = append(res.CommonPrefixes, commonPrefix{enc.apply(p)})
	}
	return writeXML(w, http.StatusOK, res)
}

// entry renders a row as a listing element named name. latest is set
// only in version listings; owner, when set, shows the row's owner.
// Delete markers carry no ETag, size or class.
func entry(name string, v *meta.Version, latest *bool, owner func(string) *Owner, enc encoding) objectEntry {
	e := objectEntry{
		XMLName:      xml.Name{Local: name},
		Key:          enc.apply(v.Key),
		IsLatest:     latest,
		LastModified: isoTime(v.LastModified()),
	}
	if latest != nil {
		e.VersionID = v.WireID()
	}
	if owner != nil {
		e.Owner = owner(v.Owner)
	}
	if v.DeleteMarker {
		return e
	}
	size := v.Size
	e.ETag, e.Size, e.StorageClass = `"`+v.ETag+`"`, &size, storageClass(v)
	for _, a := range checksumAlgs {
		if sum, ok := v.Checksums[a.name]; ok {
			e.ChecksumAlgorithm = append(e.ChecksumAlgorithm, a.name)
			if sum != "" {
				e.ChecksumType = sumType(sum)
			}
		}
	}
	return e
}

// storageClass is v's storage class as listings show it: STANDARD when
// none was given.
func storageClass(v *meta.Version) string {
	if v.StorageClass == "" {
		return "STANDARD"
	}
	return v.StorageClass
}

// encoding is a listing's encoding-type: keys and prefixes URL-encoded,
// so that keys with characters XML cannot carry survive the trip.
type encoding struct{ name string }

func listEncoding(q *request) (encoding, error) {
	switch e := q.query.Get("encoding-type"); e {
	case "", "url":
		return encoding{e}, nil
	default:
		return encoding{}, errInvalidArgument.with("Invalid Encoding Method specified in Request.")
	}
}

func (e encoding) apply(s string) string {
	if e.name == "" {
		return s
	}
	return sigv4.URIEncode(s, false)
}

// intParam parses an integer query parameter within [lo, hi]; def when
// absent.
func intParam(q *request, name string, def, lo, hi int) (int, error) {
	s, ok := q.query[name]
	if !ok {
		return def, nil
	}
	n, err := strconv.Atoi(s[0])
	if err != nil || n < lo || n > hi {
		return 0, errInvalidArgument.with("Provided %s not an integer or within integer range [%d, %d].", name, lo, hi)
	}
	return n, nil
}

// Continuation tokens are opaque to clients: the key (or bucket name) a
// page ended at, base64url-encoded.
func encodeToken(after string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(after))
}

func decodeToken(token string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return "", errInvalidArgument.with("The continuation token provided is incorrect.")
	}
	return string(b), nil
}
