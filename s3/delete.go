package s3

import (
	"encoding/xml"
	"log/slog"
	"net/http"
)

// maxDeleteKeys is the most keys one DeleteObjects may name.
const maxDeleteKeys = 1000

// deleteRequest is DeleteObjects' request body.
type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Quiet   bool
	Objects []struct {
		Key       string
		VersionID string `xml:"VersionId"`
	} `xml:"Object"`
}

type deleteResult struct {
	XMLName xml.Name      `xml:"DeleteResult"`
	Xmlns   string        `xml:"xmlns,attr"`
	Deleted []deletedItem `xml:"Deleted"`
	Errors  []deleteError `xml:"Error"`
}

type deletedItem struct {
	Key                   string
	VersionID             string `xml:"VersionId,omitempty"`
	DeleteMarker          bool   `xml:",omitempty"`
	DeleteMarkerVersionID string `xml:"DeleteMarkerVersionId,omitempty"`
}

type deleteError struct {
	Key       string
	VersionID string `xml:"VersionId,omitempty"`
	Code      string
	Message   string
}

// deleteObjects deletes up to 1000 keys or versions, each exactly as
// DeleteObject would, and reports each outcome (only failures when Quiet).
func (h *Handler) deleteObjects(w http.ResponseWriter, q *request) error {
	body, err := readBody(q, maxDeleteBody)
	if err != nil {
		return err
	}
	var req deleteRequest
	if err := decodeXML(body, &req); err != nil {
		return err
	}
	if len(req.Objects) == 0 || len(req.Objects) > maxDeleteKeys {
		return errMalformedXML.with("A DeleteObjects request names 1 to %d objects, not %d.", maxDeleteKeys, len(req.Objects))
	}
	if _, err := h.svc.Bucket(q.ctx, q.bucket); err != nil {
		return err
	}
	res := deleteResult{Xmlns: xmlns}
	for _, o := range req.Objects {
		r, err := h.deleteOne(q, o.Key, o.VersionID)
		if err != nil {
			e := apiError(err)
			if e.Status >= 500 {
				h.log.LogAttrs(q.ctx, slog.LevelError, "s3 batch delete", slog.String("id", q.id),
					slog.String("key", o.Key), slog.String("err", err.Error()))
			}
			res.Errors = append(res.Errors, deleteError{Key: o.Key, VersionID: o.VersionID, Code: e.Code, Message: e.Message})
			continue
		}
		if req.Quiet {
			continue
		}
		d := deletedItem{Key: o.Key, VersionID: o.VersionID}
		if r.DeleteMarker {
			d.DeleteMarker, d.DeleteMarkerVersionID = true, r.VersionID
		}
		res.Deleted = append(res.Deleted, d)
	}
	return writeXML(w, http.StatusOK, res)
}
