package s3

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// The bucket lifecycle API: the rules of a bucket's retention, which the
// collector (package gc) applies. The XML maps onto meta.LifecycleRule,
// which keeps what the collector needs and no more: a rule's filter is
// kept as its prefix, so a rule given with the legacy top-level Prefix or
// with Filter/And/Prefix reads back as Filter/Prefix, and an
// ExpiredObjectDeleteMarker of false reads back absent. What the
// collector cannot apply (transitions, dated expirations, tag and size
// filters) is refused with NotImplemented rather than stored and ignored.

// lifecycleConfiguration is the body of Get/PutBucketLifecycleConfiguration.
// Pointers tell an element given as empty or zero from one not given, and
// leave the ones not given out of a rendered rule.
type lifecycleConfiguration struct {
	XMLName xml.Name        `xml:"LifecycleConfiguration"`
	Xmlns   string          `xml:"xmlns,attr,omitempty"`
	Rules   []lifecycleRule `xml:"Rule"`
	unknownElements
}

type lifecycleRule struct {
	ID                             string
	Prefix                         *string // the legacy filter
	Filter                         *lifecycleFilter
	Status                         string
	Expiration                     *lifecycleExpiration
	NoncurrentVersionExpiration    *noncurrentExpiration
	AbortIncompleteMultipartUpload *abortIncompleteUpload
	Transitions                    []struct{} `xml:"Transition"`
	NoncurrentVersionTransitions   []struct{} `xml:"NoncurrentVersionTransition"`
	unknownElements
}

type lifecycleFilter struct {
	Prefix *string
	And    *lifecycleAnd
	lifecyclePredicates
}

type lifecycleAnd struct {
	Prefix *string
	lifecyclePredicates
}

// lifecyclePredicates are the filter predicates stratafs does not apply:
// objects carry no tags, and sizes are not filtered on.
type lifecyclePredicates struct {
	Tags                  []struct{} `xml:"Tag"`
	ObjectSizeGreaterThan *string
	ObjectSizeLessThan    *string
	unknownElements
}

type lifecycleExpiration struct {
	Date                      *string
	Days                      *int
	ExpiredObjectDeleteMarker *bool
	unknownElements
}

type noncurrentExpiration struct {
	NoncurrentDays          *int
	NewerNoncurrentVersions *int
	unknownElements
}

type abortIncompleteUpload struct {
	DaysAfterInitiation *int
	unknownElements
}

// unknownElements collects the child elements a lifecycle document's
// schema does not have. S3 validates the document against its schema, and
// an element we skipped could be an action the client expects applied.
type unknownElements struct {
	Unknown []struct{ XMLName xml.Name } `xml:",any"`
}

func (u *unknownElements) check() error {
	if len(u.Unknown) > 0 {
		return errMalformedXML.with("The lifecycle configuration has an unknown element <%s>.", u.Unknown[0].XMLName.Local)
	}
	return nil
}

func (h *Handler) putBucketLifecycle(w http.ResponseWriter, q *request) error {
	body, err := readBody(q, maxLifecycleBody)
	if err != nil {
		return err
	}
	var cfg lifecycleConfiguration
	if err := decodeXML(body, &cfg); err != nil {
		return err
	}
	rules, err := cfg.rules()
	if err != nil {
		return err
	}
	if _, err := h.svc.SetLifecycle(q.ctx, q.bucket, rules); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (h *Handler) getBucketLifecycle(w http.ResponseWriter, q *request) error {
	b, err := h.svc.Bucket(q.ctx, q.bucket)
	if err != nil {
		return err
	}
	if len(b.Lifecycle) == 0 {
		return errNoSuchLifecycle
	}
	doc := lifecycleConfiguration{Xmlns: xmlns}
	for _, r := range b.Lifecycle {
		doc.Rules = append(doc.Rules, ruleXML(r))
	}
	return writeXML(w, http.StatusOK, doc)
}

func (h *Handler) deleteBucketLifecycle(w http.ResponseWriter, q *request) error {
	if _, err := h.svc.SetLifecycle(q.ctx, q.bucket, nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rules converts the document to the core's rules. It checks the shape
// S3's schema imposes (MalformedXML) and refuses what stratafs does not
// apply (NotImplemented); the limits on values (InvalidArgument) are the
// core's, checked by object.SetLifecycle.
func (c *lifecycleConfiguration) rules() ([]meta.LifecycleRule, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	if len(c.Rules) == 0 {
		return nil, errMalformedXML.with("A lifecycle configuration has at least one rule.")
	}
	rules := make([]meta.LifecycleRule, len(c.Rules))
	for i := range c.Rules {
		r, err := c.Rules[i].rule()
		if err != nil {
			return nil, err
		}
		rules[i] = r
	}
	return rules, nil
}

func (x *lifecycleRule) rule() (meta.LifecycleRule, error) {
	r := meta.LifecycleRule{ID: x.ID}
	if err := x.check(); err != nil {
		return r, err
	}
	switch x.Status {
	case "Enabled":
		r.Enabled = true
	case "Disabled":
	default:
		return r, errMalformedXML.with("Rule %q: Status must be Enabled or Disabled, not %q.", x.ID, x.Status)
	}
	switch {
	case x.Filter != nil && x.Prefix != nil:
		return r, errMalformedXML.with("Rule %q has both Filter and Prefix.", x.ID)
	case x.Filter != nil:
		p, err := x.Filter.prefix(x.ID)
		if err != nil {
			return r, err
		}
		r.Prefix = p
	case x.Prefix != nil:
		r.Prefix = *x.Prefix
	default:
		return r, errMalformedXML.with("Rule %q needs a Filter or a Prefix.", x.ID)
	}
	if len(x.Transitions) > 0 || len(x.NoncurrentVersionTransitions) > 0 {
		return r, errNotImplemented.with("Rule %q: transitions are not implemented; stratafs has one storage class.", x.ID)
	}
	var err error
	if e := x.Expiration; e != nil {
		if err := e.check(); err != nil {
			return r, err
		}
		switch {
		case e.Date != nil && (e.Days != nil || e.ExpiredObjectDeleteMarker != nil):
			return r, errMalformedXML.with("Rule %q: Expiration Date cannot be specified with Days or ExpiredObjectDeleteMarker.", x.ID)
		case e.Date != nil:
			return r, errNotImplemented.with("Rule %q: Expiration at a Date is not implemented; use Days.", x.ID)
		case e.Days != nil && e.ExpiredObjectDeleteMarker != nil:
			return r, errMalformedXML.with("Rule %q: ExpiredObjectDeleteMarker cannot be specified with Days.", x.ID)
		case e.Days == nil && e.ExpiredObjectDeleteMarker == nil:
			return r, errMalformedXML.with("Rule %q: Expiration needs Days or ExpiredObjectDeleteMarker.", x.ID)
		}
		if r.ExpirationDays, err = positive(x.ID, "Days", e.Days); err != nil {
			return r, err
		}
		r.ExpiredObjectDeleteMarker = e.ExpiredObjectDeleteMarker != nil && *e.ExpiredObjectDeleteMarker
	}
	if n := x.NoncurrentVersionExpiration; n != nil {
		if err := n.check(); err != nil {
			return r, err
		}
		if n.NoncurrentDays == nil {
			return r, errMalformedXML.with("Rule %q: NoncurrentVersionExpiration needs NoncurrentDays.", x.ID)
		}
		if r.NoncurrentDays, err = positive(x.ID, "NoncurrentDays", n.NoncurrentDays); err != nil {
			return r, err
		}
		if r.NewerNoncurrentVersions, err = positive(x.ID, "NewerNoncurrentVersions", n.NewerNoncurrentVersions); err != nil {
			return r, err
		}
	}
	if a := x.AbortIncompleteMultipartUpload; a != nil {
		if err := a.check(); err != nil {
			return r, err
		}
		if a.DaysAfterInitiation == nil {
			return r, errMalformedXML.with("Rule %q: AbortIncompleteMultipartUpload needs DaysAfterInitiation.", x.ID)
		}
		if r.AbortIncompleteUploadDays, err = positive(x.ID, "DaysAfterInitiation", a.DaysAfterInitiation); err != nil {
			return r, err
		}
	}
	return r, nil
}

// prefix returns the key prefix a filter selects: its Prefix, or the
// Prefix of its And, or every key for an empty filter.
func (f *lifecycleFilter) prefix(id string) (string, error) {
	if err := f.lifecyclePredicates.check(id); err != nil {
		return "", err
	}
	switch {
	case f.And != nil && f.Prefix != nil:
		return "", errMalformedXML.with("Rule %q: a Filter has one of Prefix and And.", id)
	case f.And != nil:
		if err := f.And.lifecyclePredicates.check(id); err != nil {
			return "", err
		}
		if f.And.Prefix == nil {
			return "", errMalformedXML.with("Rule %q: And combines a Prefix with other predicates.", id)
		}
		return *f.And.Prefix, nil
	case f.Prefix != nil:
		return *f.Prefix, nil
	}
	return "", nil
}

// check refuses the predicates stratafs does not filter on.
func (p *lifecyclePredicates) check(id string) error {
	if err := p.unknownElements.check(); err != nil {
		return err
	}
	switch {
	case len(p.Tags) > 0:
		return errNotImplemented.with("Rule %q: tag filters are not implemented; objects carry no tags.", id)
	case p.ObjectSizeGreaterThan != nil || p.ObjectSizeLessThan != nil:
		return errNotImplemented.with("Rule %q: object size filters are not implemented.", id)
	}
	return nil
}

// positive returns a count that, when given, must be a positive integer:
// the core's rules take 0 for "absent", so a 0 given must not pass as
// one.
func positive(id, name string, n *int) (int, error) {
	switch {
	case n == nil:
		return 0, nil
	case *n <= 0:
		return 0, errInvalidArgument.with("Rule %q: %s must be a positive integer.", id, name)
	}
	return *n, nil
}

// ruleXML renders a stored rule, its filter always as Filter/Prefix.
func ruleXML(r meta.LifecycleRule) lifecycleRule {
	x := lifecycleRule{ID: r.ID, Status: "Disabled", Filter: &lifecycleFilter{Prefix: &r.Prefix}}
	if r.Enabled {
		x.Status = "Enabled"
	}
	switch {
	case r.ExpirationDays > 0:
		x.Expiration = &lifecycleExpiration{Days: &r.ExpirationDays}
	case r.ExpiredObjectDeleteMarker:
		x.Expiration = &lifecycleExpiration{ExpiredObjectDeleteMarker: &r.ExpiredObjectDeleteMarker}
	}
	if r.NoncurrentDays > 0 {
		x.NoncurrentVersionExpiration = &noncurrentExpiration{NoncurrentDays: &r.NoncurrentDays}
		if r.NewerNoncurrentVersions > 0 {
			x.NoncurrentVersionExpiration.NewerNoncurrentVersions = &r.NewerNoncurrentVersions
		}
	}
	if r.AbortIncompleteUploadDays > 0 {
		x.AbortIncompleteMultipartUpload = &abortIncompleteUpload{DaysAfterInitiation: &r.AbortIncompleteUploadDays}
	}
	return x
}

// setExpiration sets x-amz-expiration on the response that writes or
// reads v as its key's current version, when an Expiration rule of the
// bucket will expire it: the day it falls due (as the collector counts
// it) and the rule, the one due first when several apply.
func (h *Handler) setExpiration(q *request, hdr http.Header, v *meta.Version) {
	if v.DeleteMarker {
		return
	}
	b, err := h.svc.Bucket(q.ctx, q.bucket)
	if err != nil {
		return // the response is about the object; the header is a hint
	}
	var at time.Time
	var rule *meta.LifecycleRule
	for i := range b.Lifecycle {
		r := &b.Lifecycle[i]
		if r.ExpirationDays <= 0 || !r.Applies(v.Key) {
			continue
		}
		if due := object.DueAt(v.LastModified(), r.ExpirationDays); rule == nil || due.Before(at) {
			at, rule = due, r
		}
	}
	if rule != nil {
		hdr.Set("x-amz-expiration", fmt.Sprintf(`expiry-date="%s", rule-id="%s"`, at.Format(http.TimeFormat), rule.ID))
	}
}
