package object

import (
	"time"

	"github.com/stratafs/stratafs/meta"
)

// This file is the retention policy, once: given a bucket's lifecycle
// rules, an instant and one key's rows newest first, which rows expire, as
// AWS S3 lifecycle decides it. It is pure (no store, no clock of its own);
// the collector (package gc) streams rows through it and applies its
// answers with Service.Expire.
//
// Where several enabled rules cover a key, each is applied as if it were
// alone and a row expires if any of them expires it: S3 resolves
// overlapping expirations in favour of the one that deletes first.
//
// Days are counted as S3 counts them: an action N days after an instant t
// falls due at the first midnight UTC after t + N days (a version written
// 2014-01-15 10:30 UTC with Days 3 expires at 2014-01-19 00:00 UTC).

// An Action is what an expiry does to its row.
type Action uint8

const (
	// ExpireCurrent applies Expiration Days to a current version that is
	// not a delete marker: DELETE of the key as its bucket's versioning
	// state prescribes (a delete marker in a versioned bucket, which makes
	// the version noncurrent; removal in an unversioned one).
	ExpireCurrent Action = iota + 1
	// ExpireNoncurrent applies NoncurrentVersionExpiration: the noncurrent
	// row (a version or a delete marker) is removed permanently.
	ExpireNoncurrent
	// RemoveMarker removes a delete marker left as its key's only row
	// (S3's expired object delete marker): at once under
	// ExpiredObjectDeleteMarker, once the marker is Days old under
	// Expiration Days.
	RemoveMarker
)

func (a Action) String() string {
	switch a {
	case ExpireCurrent:
		return "expire current"
	case ExpireNoncurrent:
		return "expire noncurrent"
	case RemoveMarker:
		return "remove delete marker"
	}
	return "action(?)"
}

// An Expiry is one row a policy expires.
type Expiry struct {
	Version *meta.Version
	Action  Action
	Rule    string // the ID of the rule that expires it
}

// A Policy is a bucket's lifecycle rules judged at one instant.
type Policy struct {
	rules []meta.LifecycleRule
	now   time.Time
}

// NewPolicy returns the policy of rules at instant now.
func NewPolicy(rules []meta.LifecycleRule, now time.Time) *Policy {
	return &Policy{rules: rules, now: now}
}

// Due reports whether an action days after t is due by the policy's
// instant; days ≤ 0 is never due.
func (p *Policy) Due(t time.Time, days int) bool {
	return days > 0 && !p.now.Before(DueAt(t, days))
}

// DueAt returns when an action days after t falls due: the first
// midnight UTC after t + days.
func DueAt(t time.Time, days int) time.Time {
	d := t.UTC().AddDate(0, 0, days)
	return time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
}

// Expire returns the expiries among rows, one key's rows newest first:
// Key and Row over each row, then End.
func (p *Policy) Expire(rows []*meta.Version) []Expiry {
	if len(rows) == 0 {
		return nil
	}
	var out []Expiry
	k := p.Key(rows[0].Key)
	for _, v := range rows {
		if e, ok := k.Row(v); ok {
			out = append(out, e)
		}
	}
	if e, ok := k.End(); ok {
		out = append(out, e)
	}
	return out
}

// AbortUpload reports whether an incomplete upload is due to be aborted
// (AbortIncompleteMultipartUpload) and under which rule.
func (p *Policy) AbortUpload(u *meta.Upload) (rule string, ok bool) {
	for i := range p.rules {
		r := &p.rules[i]
		if r.Applies(u.Key) && p.Due(u.Initiated, r.AbortIncompleteUploadDays) {
			return r.ID, true
		}
	}
	return "", false
}

// A KeyPass evaluates one key's rows as they stream past, newest first,
// in constant memory: a key with a million versions costs no more to
// judge than one with two. Rows must all be of its key.
type KeyPass struct {
	p     *Policy
	rules []*meta.LifecycleRule // the rules that apply to the key
	n     int                   // rows seen
	prev  time.Time             // when the previous (newer) row was written
	head  *meta.Version         // the current row, when it is a delete marker
	kept  int                   // rows after the head that do not expire
}

// Key starts a pass over the rows of key.
func (p *Policy) Key(key string) *KeyPass {
	k := &KeyPass{p: p}
	for i := range p.rules {
		if p.rules[i].Applies(key) {
			k.rules = append(k.rules, &p.rules[i])
		}
	}
	return k
}

// Row judges the key's next row.
func (k *KeyPass) Row(v *meta.Version) (Expiry, bool) {
	n, since := k.n, k.prev
	k.n++
	k.prev = v.LastModified()
	if n == 0 {
		if v.DeleteMarker {
			k.head = v
			return Expiry{}, false
		}
		for _, r := range k.rules {
			if k.p.Due(v.LastModified(), r.ExpirationDays) {
				return Expiry{Version: v, Action: ExpireCurrent, Rule: r.ID}, true
			}
		}
		return Expiry{}, false
	}
	// A noncurrent row became noncurrent when its successor was written;
	// n-1 noncurrent rows are newer than it.
	for _, r := range k.rules {
		if n-1 >= r.NewerNoncurrentVersions && k.p.Due(since, r.NoncurrentDays) {
			return Expiry{Version: v, Action: ExpireNoncurrent, Rule: r.ID}, true
		}
	}
	k.kept++
	return Expiry{}, false
}

// End judges the key's current row once every row was seen: a delete
// marker that no other row outlives is removed if a rule says so. It is
// judged in the same pass that expires the rows below it, so a key's
// history disappears in one collection rather than two.
func (k *KeyPass) End() (Expiry, bool) {
	if k.head == nil || k.kept > 0 {
		return Expiry{}, false
	}
	for _, r := range k.rules {
		if r.ExpiredObjectDeleteMarker || k.p.Due(k.head.LastModified(), r.ExpirationDays) {
			return Expiry{Version: k.head, Action: RemoveMarker, Rule: r.ID}, true
		}
	}
	return Expiry{}, false
}
