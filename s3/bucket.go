package s3

import (
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/stratafs/stratafs/meta"
)

// createBucketConfiguration is the optional body of CreateBucket.
type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string
}

func (h *Handler) createBucket(w http.ResponseWriter, q *request) error {
	if err := rejectHeaders(q.r.Header, "X-Amz-Bucket-Object-Lock-Enabled", "X-Amz-Grant-Full-Control",
		"X-Amz-Grant-Read", "X-Amz-Grant-Read-Acp", "X-Amz-Grant-Write", "X-Amz-Grant-Write-Acp"); err != nil {
		return err
	}
	if err := checkACL(q.r.Header); err != nil {
		return err
	}
	body, err := readBody(q, maxConfigBody)
	if err != nil {
		return err
	}
	if len(body) > 0 {
		var cfg createBucketConfiguration
		if err := decodeXML(body, &cfg); err != nil {
			return err
		}
		if cfg.LocationConstraint != "" && cfg.LocationConstraint != h.cfg.Region {
			return errIllegalLocation.with("The %s location constraint is incompatible with the region of this endpoint, %s.",
				cfg.LocationConstraint, h.cfg.Region)
		}
	}
	_, err = h.svc.CreateBucket(q.ctx, q.bucket, q.owner)
	if errors.Is(err, meta.ErrBucketExists) {
		if b, berr := h.svc.Bucket(q.ctx, q.bucket); berr == nil && b.Owner == q.owner {
			return errBucketOwnedByYou
		}
		return errBucketAlreadyExists
	}
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/"+q.bucket)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) headBucket(w http.ResponseWriter, q *request) error {
	if _, err := h.svc.Bucket(q.ctx, q.bucket); err != nil {
		return err
	}
	w.Header().Set("x-amz-bucket-region", h.cfg.Region)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) deleteBucket(w http.ResponseWriter, q *request) error {
	if err := h.svc.DeleteBucket(q.ctx, q.bucket); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// locationConstraint is GetBucketLocation's answer: empty for us-east-1,
// as S3 reports it.
type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	Xmlns   string   `xml:"xmlns,attr"`
	Region  string   `xml:",chardata"`
}

func (h *Handler) getBucketLocation(w http.ResponseWriter, q *request) error {
	if _, err := h.svc.Bucket(q.ctx, q.bucket); err != nil {
		return err
	}
	doc := locationConstraint{Xmlns: xmlns}
	if h.cfg.Region != "us-east-1" {
		doc.Region = h.cfg.Region
	}
	return writeXML(w, http.StatusOK, doc)
}

// versioningConfiguration is the body of Get/PutBucketVersioning.
type versioningConfiguration struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	Xmlns     string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:",omitempty"`
	MfaDelete string   `xml:",omitempty"`
}

func (h *Handler) getBucketVersioning(w http.ResponseWriter, q *request) error {
	b, err := h.svc.Bucket(q.ctx, q.bucket)
	if err != nil {
		return err
	}
	doc := versioningConfiguration{Xmlns: xmlns}
	switch b.Versioning {
	case meta.Enabled:
		doc.Status = "Enabled"
	case meta.Suspended:
		doc.Status = "Suspended"
	}
	return writeXML(w, http.StatusOK, doc)
}

func (h *Handler) putBucketVersioning(w http.ResponseWriter, q *request) error {
	body, err := readBody(q, maxConfigBody)
	if err != nil {
		return err
	}
	var cfg versioningConfiguration
	if err := decodeXML(body, &cfg); err != nil {
		return err
	}
	if cfg.MfaDelete == "Enabled" {
		return errNotImplemented.with("MFA delete is not implemented.")
	}
	var state meta.Versioning
	switch cfg.Status {
	case "Enabled":
		state = meta.Enabled
	case "Suspended":
		state = meta.Suspended
	default:
		return errIllegalVersioning.with("The versioning status must be Enabled or Suspended, not %q.", cfg.Status)
	}
	if _, err := h.svc.SetVersioning(q.ctx, q.bucket, state); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
