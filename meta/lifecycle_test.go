package meta

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/stratafs/stratafs/meta/metapb"
)

func TestValidLifecycle(t *testing.T) {
	ok := LifecycleRule{ID: "r", Enabled: true, NoncurrentDays: 1}
	with := func(edit func(*LifecycleRule)) []LifecycleRule {
		r := ok
		edit(&r)
		return []LifecycleRule{r}
	}
	for _, c := range []struct {
		name  string
		rules []LifecycleRule
		valid bool
	}{
		{"none", nil, true},
		{"noncurrent", with(func(*LifecycleRule) {}), true},
		{"every action", with(func(r *LifecycleRule) {
			r.ExpirationDays, r.NewerNoncurrentVersions, r.AbortIncompleteUploadDays = 1, 100, 1
		}), true},
		{"disabled rules are checked too", with(func(r *LifecycleRule) { r.Enabled, r.NoncurrentDays = false, -1 }), false},
		{"marker only", with(func(r *LifecycleRule) { r.NoncurrentDays, r.ExpiredObjectDeleteMarker = 0, true }), true},
		{"no action", with(func(r *LifecycleRule) { r.NoncurrentDays = 0 }), false},
		{"no id", with(func(r *LifecycleRule) { r.ID = "" }), false},
		{"long id", with(func(r *LifecycleRule) { r.ID = strings.Repeat("x", 256) }), false},
		{"long prefix", with(func(r *LifecycleRule) { r.Prefix = strings.Repeat("x", MaxKeyLen+1) }), false},
		{"prefix not UTF-8", with(func(r *LifecycleRule) { r.Prefix = "\xff" }), false},
		{"negative days", with(func(r *LifecycleRule) { r.ExpirationDays = -1 }), false},
		{"days beyond int32", with(func(r *LifecycleRule) { r.AbortIncompleteUploadDays = math.MaxInt32 + 1 }), false},
		{"marker with days", with(func(r *LifecycleRule) { r.ExpirationDays, r.ExpiredObjectDeleteMarker = 1, true }), false},
		{"newer without days", with(func(r *LifecycleRule) { r.NoncurrentDays, r.ExpirationDays, r.NewerNoncurrentVersions = 0, 1, 1 }), false},
		{"newer above 100", with(func(r *LifecycleRule) { r.NewerNoncurrentVersions = 101 }), false},
		{"duplicate ids", []LifecycleRule{ok, ok}, false},
		{"too many", make([]LifecycleRule, MaxLifecycleRules+1), false},
	} {
		err := ValidLifecycle(c.rules)
		if c.valid && err != nil || !c.valid && !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: ValidLifecycle = %v, want valid %v", c.name, err, c.valid)
		}
	}
}

func TestRuleApplies(t *testing.T) {
	r := LifecycleRule{Prefix: "logs/", Enabled: true}
	for key, want := range map[string]bool{"logs/a": true, "logs/": true, "logs": false, "x/logs/a": false} {
		if got := r.Applies(key); got != want {
			t.Errorf("rule with prefix %q applies to %q: %v, want %v", r.Prefix, key, got, want)
		}
	}
	r.Enabled = false
	if r.Applies("logs/a") {
		t.Error("a disabled rule applies")
	}
}

func TestBucketRulesRejected(t *testing.T) {
	b := Bucket{Name: "b", Lifecycle: []LifecycleRule{{ID: "r", NoncurrentDays: -1}}}
	if _, err := MarshalBucket(b); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("negative days: got %v, want ErrInvalidArgument", err)
	}
	data, err := proto.Marshal(&metapb.Bucket{Name: "b", Lifecycle: []*metapb.LifecycleRule{{Id: "r", NoncurrentDays: math.MaxUint32}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := UnmarshalBucket(data); !errors.Is(err, ErrCorrupt) {
		t.Errorf("days beyond int32 in a stored bucket: got %v, want ErrCorrupt", err)
	}
}

func TestLeaseRoundTrip(t *testing.T) {
	for _, l := range []Lease{
		{Name: "gc", Holder: "host:1", Expires: time.Unix(1700000000, 7).UTC()},
		{Name: "gc", Holder: "h"},
	} {
		data, err := MarshalLease(l)
		if err != nil {
			t.Fatalf("marshal %+v: %v", l, err)
		}
		got, err := UnmarshalLease(data)
		if err != nil || got != l {
			t.Errorf("round trip of %+v: %+v, %v", l, got, err)
		}
	}
	for _, l := range []Lease{{Holder: "h"}, {Name: "gc"}} {
		if _, err := MarshalLease(l); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("marshal %+v: %v, want ErrInvalidArgument", l, err)
		}
	}
	if _, err := UnmarshalLease([]byte{0x0a, 2, 'g', 'c'}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("lease without a holder: %v, want ErrCorrupt", err)
	}
}

func FuzzUnmarshalLease(f *testing.F) {
	fuzzDecoder(f, MarshalLease, UnmarshalLease, Lease{Name: "gc", Holder: "h", Expires: time.Unix(5, 0).UTC()})
}

func FuzzUnmarshalBucket(f *testing.F) {
	fuzzDecoder(f, MarshalBucket, UnmarshalBucket, Bucket{Name: "b", Lifecycle: []LifecycleRule{{ID: "r", Prefix: "p", NoncurrentDays: 3}}})
}
