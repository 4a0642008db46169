package object_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// day0 is 2030-01-15 10:30 UTC, the instant of S3's own example ("an
// object created on 1/15 10:30 AM UTC with Days 3 expires 1/19 00:00").
var day0 = time.Date(2030, 1, 15, 10, 30, 0, 0, time.UTC)

// at returns day0 plus days, and optionally hours and minutes.
func at(days int, hm ...int) time.Time {
	t := day0.AddDate(0, 0, days)
	for i, unit := range []time.Duration{time.Hour, time.Minute}[:len(hm)] {
		t = t.Add(time.Duration(hm[i]) * unit)
	}
	return t
}

// history builds one key's rows, newest first, from their write times
// given oldest first; "m" after a time makes that row a delete marker.
func history(key string, spec ...any) []*meta.Version {
	var rows []*meta.Version
	for _, s := range spec {
		switch s := s.(type) {
		case time.Time:
			rows = append(rows, &meta.Version{Key: key, ID: meta.AsOf(s)})
		case string: // "m"
			rows[len(rows)-1].DeleteMarker = true
		}
	}
	slices.Reverse(rows)
	return rows
}

// describe names expiries as "action@index" with index the row's place
// in rows (0 is the current row).
func describe(rows []*meta.Version, es []object.Expiry) string {
	var out []string
	for _, e := range es {
		i := slices.Index(rows, e.Version)
		out = append(out, fmt.Sprintf("%s@%d(%s)", e.Action, i, e.Rule))
	}
	return strings.Join(out, " ")
}

func TestDueAt(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		days int
		want time.Time
	}{
		{day0, 3, time.Date(2030, 1, 19, 0, 0, 0, 0, time.UTC)},
		{day0, 1, time.Date(2030, 1, 17, 0, 0, 0, 0, time.UTC)},
		// A write at midnight sharp is due at the next midnight after
		// t + days, not at t + days itself.
		{time.Date(2030, 1, 15, 0, 0, 0, 0, time.UTC), 1, time.Date(2030, 1, 17, 0, 0, 0, 0, time.UTC)},
		{time.Date(2030, 1, 15, 23, 59, 59, 0, time.UTC), 1, time.Date(2030, 1, 17, 0, 0, 0, 0, time.UTC)},
		{time.Date(2030, 12, 31, 12, 0, 0, 0, time.UTC), 1, time.Date(2031, 1, 2, 0, 0, 0, 0, time.UTC)},
		// Other zones count in UTC.
		{time.Date(2030, 1, 15, 23, 30, 0, 0, time.FixedZone("x", -2*3600)), 1, time.Date(2030, 1, 18, 0, 0, 0, 0, time.UTC)},
	} {
		if got := object.DueAt(c.t, c.days); !got.Equal(c.want) {
			t.Errorf("DueAt(%v, %d) = %v, want %v", c.t, c.days, got, c.want)
		}
	}
}

func TestPolicy(t *testing.T) {
	noncurrent := func(days, newer int) meta.LifecycleRule {
		return meta.LifecycleRule{ID: "nc", Enabled: true, NoncurrentDays: days, NewerNoncurrentVersions: newer}
	}
	expiration := func(days int) meta.LifecycleRule {
		return meta.LifecycleRule{ID: "exp", Enabled: true, ExpirationDays: days}
	}
	marker := meta.LifecycleRule{ID: "dm", Enabled: true, ExpiredObjectDeleteMarker: true}
	for _, c := range []struct {
		name  string
		rules []meta.LifecycleRule
		now   time.Time
		rows  []*meta.Version
		want  string
	}{
		// NoncurrentVersionExpiration counts from the successor's write:
		// v1 became noncurrent on day 1 at 10:30, so 3 days later it is
		// due at the next midnight, day 5 00:00.
		{"noncurrent: not yet", []meta.LifecycleRule{noncurrent(3, 0)}, at(4, 13, 29),
			history("k", at(0), at(1)), ""},
		{"noncurrent: due at midnight", []meta.LifecycleRule{noncurrent(3, 0)}, at(4, 13, 30),
			history("k", at(0), at(1)), "expire noncurrent@1(nc)"},
		{"noncurrent: the current version is never touched", []meta.LifecycleRule{noncurrent(1, 0)}, at(400),
			history("k", at(0)), ""},
		{"noncurrent: each row by its own successor", []meta.LifecycleRule{noncurrent(3, 0)}, at(7),
			history("k", at(0), at(1), at(3), at(10)), "expire noncurrent@2(nc) expire noncurrent@3(nc)"},
		{"noncurrent: markers are versions too", []meta.LifecycleRule{noncurrent(1, 0)}, at(31),
			history("k", at(0), at(1), "m", at(2), at(29)), "expire noncurrent@1(nc) expire noncurrent@2(nc) expire noncurrent@3(nc)"},
		{"newer noncurrent: the 2 newest noncurrent stay", []meta.LifecycleRule{noncurrent(1, 2)}, at(100),
			history("k", at(0), at(1), at(2), at(3), at(4)), "expire noncurrent@3(nc) expire noncurrent@4(nc)"},
		{"newer noncurrent: and days must pass too", []meta.LifecycleRule{noncurrent(10, 1)}, at(25),
			history("k", at(0), at(1), at(20), at(21)), "expire noncurrent@3(nc)"},
		{"newer noncurrent: fewer than that many", []meta.LifecycleRule{noncurrent(1, 5)}, at(100),
			history("k", at(0), at(1), at(2)), ""},

		// Expiration Days acts on the current version from its own write.
		{"expiration: not yet", []meta.LifecycleRule{expiration(3)}, at(3, 13, 29),
			history("k", at(0)), ""},
		{"expiration: due", []meta.LifecycleRule{expiration(3)}, at(3, 13, 30),
			history("k", at(0)), "expire current@0(exp)"},
		{"expiration: noncurrent rows are not its business", []meta.LifecycleRule{expiration(1)}, at(100),
			history("k", at(0), at(1)), "expire current@0(exp)"},
		{"expiration: a marker with versions below stays", []meta.LifecycleRule{expiration(1)}, at(100),
			history("k", at(0), at(1), "m"), ""},
		{"expiration: a lone marker goes once it is Days old", []meta.LifecycleRule{expiration(5)}, at(6, 13, 30),
			history("k", at(1), "m"), "remove delete marker@0(exp)"},
		{"expiration: a younger lone marker stays", []meta.LifecycleRule{expiration(5)}, at(6, 13, 29),
			history("k", at(1), "m"), ""},

		// ExpiredObjectDeleteMarker removes a lone marker at once.
		{"marker: lone", []meta.LifecycleRule{marker}, at(0),
			history("k", at(0), "m"), "remove delete marker@0(dm)"},
		{"marker: versions below", []meta.LifecycleRule{marker}, at(100),
			history("k", at(0), at(1), "m"), ""},
		{"marker: not the current row", []meta.LifecycleRule{marker}, at(100),
			history("k", at(0), "m", at(1)), ""},
		{"marker: versions below expire in the same pass", []meta.LifecycleRule{noncurrent(1, 0), marker}, at(100),
			history("k", at(0), at(1), at(2), "m"), "expire noncurrent@1(nc) expire noncurrent@2(nc) remove delete marker@0(dm)"},
		{"marker: one version below survives", []meta.LifecycleRule{noncurrent(1, 1), marker}, at(100),
			history("k", at(0), at(1), at(2), "m"), "expire noncurrent@2(nc)"},

		// Filters, status and several rules.
		{"prefix: other keys", []meta.LifecycleRule{{ID: "logs", Prefix: "logs/", Enabled: true, ExpirationDays: 1}}, at(100),
			history("data/x", at(0)), ""},
		{"prefix: its keys", []meta.LifecycleRule{{ID: "logs", Prefix: "logs/", Enabled: true, ExpirationDays: 1}}, at(100),
			history("logs/x", at(0)), "expire current@0(logs)"},
		{"disabled", []meta.LifecycleRule{{ID: "off", ExpirationDays: 1, NoncurrentDays: 1}}, at(100),
			history("k", at(0), at(1)), ""},
		{"overlapping rules: the first due wins", []meta.LifecycleRule{
			{ID: "slow", Enabled: true, NoncurrentDays: 50},
			{ID: "fast", Enabled: true, NoncurrentDays: 5, NewerNoncurrentVersions: 1},
		}, at(20), history("k", at(0), at(1), at(2)), "expire noncurrent@2(fast)"},
		{"no rules", nil, at(1000), history("k", at(0), at(1), "m"), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			es := object.NewPolicy(c.rules, c.now).Expire(c.rows)
			if got := describe(c.rows, es); got != c.want {
				t.Errorf("expiries = %q, want %q", got, c.want)
			}
		})
	}
}

func TestPolicyAbortUpload(t *testing.T) {
	rules := []meta.LifecycleRule{
		{ID: "tmp", Prefix: "tmp/", Enabled: true, AbortIncompleteUploadDays: 1},
		{ID: "all", Enabled: true, AbortIncompleteUploadDays: 7},
	}
	for _, c := range []struct {
		key  string
		now  time.Time
		want string
	}{
		{"tmp/x", at(1, 13, 29), ""},
		{"tmp/x", at(1, 13, 30), "tmp"},
		{"x", at(7, 13, 29), ""},
		{"x", at(7, 13, 30), "all"},
	} {
		u := &meta.Upload{Key: c.key, Initiated: day0}
		rule, ok := object.NewPolicy(rules, c.now).AbortUpload(u)
		if rule != c.want || ok != (c.want != "") {
			t.Errorf("AbortUpload(%q) at %v = %q, %v; want %q", c.key, c.now, rule, ok, c.want)
		}
	}
}

func TestExpiryRemoves(t *testing.T) {
	null := &meta.Version{Key: "k", Null: true}
	versioned := &meta.Version{Key: "k"}
	for _, c := range []struct {
		e     object.Expiry
		state meta.Versioning
		want  bool
	}{
		{object.Expiry{Version: null, Action: object.ExpireCurrent}, meta.Unversioned, true},
		{object.Expiry{Version: null, Action: object.ExpireCurrent}, meta.Suspended, true},
		{object.Expiry{Version: null, Action: object.ExpireCurrent}, meta.Enabled, false},
		{object.Expiry{Version: versioned, Action: object.ExpireCurrent}, meta.Suspended, false},
		{object.Expiry{Version: versioned, Action: object.ExpireNoncurrent}, meta.Enabled, true},
		{object.Expiry{Version: versioned, Action: object.RemoveMarker}, meta.Enabled, true},
	} {
		if got := c.e.Removes(c.state); got != c.want {
			t.Errorf("%s of a null %v row in a %s bucket removes it: %v, want %v", c.e.Action, c.e.Version.Null, c.state, got, c.want)
		}
	}
}
