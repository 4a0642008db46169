package meta

import (
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/stratafs/stratafs/meta/metapb"
)

// A LifecycleRule is one rule of a bucket's lifecycle configuration, with
// the meaning S3 gives it. The rules live in the bucket record and change
// through Store.UpdateBucket; package object decides which rows they
// expire and the collector (package gc) applies that. A day count of 0
// means the action is absent.
type LifecycleRule struct {
	ID      string
	Prefix  string // the rule applies to keys starting with it; "" is every key
	Enabled bool   // S3's Status: a disabled rule is kept but not applied

	// ExpirationDays expires a key's current version this many days after
	// it was written: a delete marker in a versioned bucket, removal in an
	// unversioned one. A delete marker left as its key's only row is
	// removed once it is as old.
	ExpirationDays int
	// ExpiredObjectDeleteMarker removes a delete marker as soon as it is
	// its key's only row. S3 refuses it together with ExpirationDays.
	ExpiredObjectDeleteMarker bool
	// NoncurrentDays removes a noncurrent version this many days after it
	// became noncurrent (when its successor was written), keeping the
	// NewerNoncurrentVersions newest noncurrent versions of the key.
	NoncurrentDays          int
	NewerNoncurrentVersions int
	// AbortIncompleteUploadDays aborts multipart uploads this many days
	// after they were initiated.
	AbortIncompleteUploadDays int
}

// S3's limits on a lifecycle configuration.
const (
	MaxLifecycleRules          = 1000
	MaxLifecycleRuleID         = 255
	MaxNewerNoncurrentVersions = 100
)

// ValidLifecycle applies S3's rules to a whole configuration, as
// PutBucketLifecycleConfiguration does: at most 1000 rules with distinct,
// non-empty IDs of up to 255 characters, each with at least one action,
// positive day counts, no ExpiredObjectDeleteMarker beside ExpirationDays,
// and NewerNoncurrentVersions (1 to 100) only with NoncurrentDays. The
// store itself checks less (see MarshalBucket), so that rules accepted
// once stay readable if these checks tighten.
func ValidLifecycle(rules []LifecycleRule) error {
	if len(rules) > MaxLifecycleRules {
		return fmt.Errorf("%d lifecycle rules, at most %d: %w", len(rules), MaxLifecycleRules, ErrInvalidArgument)
	}
	ids := make(map[string]bool, len(rules))
	for _, r := range rules {
		if err := validRule(r); err != nil {
			return fmt.Errorf("lifecycle rule %q: %w", r.ID, err)
		}
		if ids[r.ID] {
			return fmt.Errorf("lifecycle rule %q: ID used twice: %w", r.ID, ErrInvalidArgument)
		}
		ids[r.ID] = true
	}
	return nil
}

func validRule(r LifecycleRule) error {
	bad := func(why string) error { return fmt.Errorf("%s: %w", why, ErrInvalidArgument) }
	if err := checkRule(r); err != nil {
		return err
	}
	switch {
	case r.ID == "" || len(r.ID) > MaxLifecycleRuleID:
		return bad(fmt.Sprintf("ID must be 1 to %d characters", MaxLifecycleRuleID))
	case len(r.Prefix) > MaxKeyLen:
		return bad("prefix longer than a key")
	case r.ExpirationDays == 0 && !r.ExpiredObjectDeleteMarker && r.NoncurrentDays == 0 && r.AbortIncompleteUploadDays == 0:
		return bad("no action")
	case r.ExpirationDays > 0 && r.ExpiredObjectDeleteMarker:
		return bad("ExpiredObjectDeleteMarker cannot be specified with Days")
	case r.NewerNoncurrentVersions > 0 && r.NoncurrentDays == 0:
		return bad("NewerNoncurrentVersions needs NoncurrentDays")
	case r.NewerNoncurrentVersions > MaxNewerNoncurrentVersions:
		return bad(fmt.Sprintf("NewerNoncurrentVersions above %d", MaxNewerNoncurrentVersions))
	}
	return nil
}

// checkRule holds what both directions of the codec enforce: counts that
// fit the stored form and a prefix that can be stored.
func checkRule(r LifecycleRule) error {
	for _, n := range []int{r.ExpirationDays, r.NoncurrentDays, r.NewerNoncurrentVersions, r.AbortIncompleteUploadDays} {
		if n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("count %d outside 0..%d: %w", n, math.MaxInt32, ErrInvalidArgument)
		}
	}
	if !utf8.ValidString(r.ID) || !utf8.ValidString(r.Prefix) {
		return fmt.Errorf("ID or prefix not UTF-8: %w", ErrInvalidArgument)
	}
	return nil
}

// Applies reports whether the rule is enabled and covers key.
func (r *LifecycleRule) Applies(key string) bool {
	return r.Enabled && len(key) >= len(r.Prefix) && key[:len(r.Prefix)] == r.Prefix
}

// rulesToPB converts a bucket's rules to their stored form.
func rulesToPB(rules []LifecycleRule) ([]*metapb.LifecycleRule, error) {
	var pbs []*metapb.LifecycleRule
	for _, r := range rules {
		if err := checkRule(r); err != nil {
			return nil, fmt.Errorf("lifecycle rule %q: %w", r.ID, err)
		}
		pbs = append(pbs, &metapb.LifecycleRule{
			Id:                        r.ID,
			Prefix:                    r.Prefix,
			Enabled:                   r.Enabled,
			ExpirationDays:            uint32(r.ExpirationDays),
			ExpiredObjectDeleteMarker: r.ExpiredObjectDeleteMarker,
			NoncurrentDays:            uint32(r.NoncurrentDays),
			NewerNoncurrentVersions:   uint32(r.NewerNoncurrentVersions),
			AbortIncompleteUploadDays: uint32(r.AbortIncompleteUploadDays),
		})
	}
	return pbs, nil
}

// rulesFromPB is the inverse of rulesToPB; no rules decode as nil.
func rulesFromPB(pbs []*metapb.LifecycleRule) ([]LifecycleRule, error) {
	var rules []LifecycleRule
	for _, pb := range pbs {
		r := LifecycleRule{
			ID:                        pb.Id,
			Prefix:                    pb.Prefix,
			Enabled:                   pb.Enabled,
			ExpirationDays:            int(pb.ExpirationDays),
			ExpiredObjectDeleteMarker: pb.ExpiredObjectDeleteMarker,
			NoncurrentDays:            int(pb.NoncurrentDays),
			NewerNoncurrentVersions:   int(pb.NewerNoncurrentVersions),
			AbortIncompleteUploadDays: int(pb.AbortIncompleteUploadDays),
		}
		if err := checkRule(r); err != nil {
			return nil, fmt.Errorf("lifecycle rule %q: %w", r.ID, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}
