package meta

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestValidBucketName(t *testing.T) {
	good := []string{"abc", "my-bucket", "my.bucket.2", strings.Repeat("a", 63), "1bucket"}
	bad := []string{"", "ab", strings.Repeat("a", 64), "My-Bucket", "-abc", "abc-", "a..b",
		"192.168.1.1", "xn--abc", "abc-s3alias", "under_score", "sp ace", "ünï"}
	for _, n := range good {
		if err := ValidBucketName(n); err != nil {
			t.Errorf("ValidBucketName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := ValidBucketName(n); !errors.Is(err, ErrInvalidBucketName) {
			t.Errorf("ValidBucketName(%q) = %v, want ErrInvalidBucketName", n, err)
		}
	}
}

func TestNewBucketIDsDiffer(t *testing.T) {
	a, err := NewBucket("alpha", "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := NewBucket("alpha", "", time.Now())
	if a.ID == b.ID {
		t.Fatal("two buckets got the same id")
	}
	if a.Shards != DefaultShards || a.Versioning != Unversioned {
		t.Fatalf("new bucket = %+v", a)
	}
}

func TestVersioningTransitions(t *testing.T) {
	for _, c := range []struct {
		from, to Versioning
		ok       bool
	}{
		{Unversioned, Enabled, true}, {Unversioned, Suspended, true}, {Enabled, Suspended, true},
		{Suspended, Enabled, true}, {Enabled, Unversioned, false}, {Suspended, Unversioned, false},
		{Unversioned, Unversioned, true},
	} {
		if got := c.from.CanChange(c.to); got != c.ok {
			t.Errorf("%s → %s allowed = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func TestValidKey(t *testing.T) {
	for _, k := range []string{"a", strings.Repeat("k", MaxKeyLen), "日本/語", "a\x00b"} {
		if err := ValidKey(k); err != nil {
			t.Errorf("ValidKey(%q) = %v", k, err)
		}
	}
	for _, k := range []string{"", strings.Repeat("k", MaxKeyLen+1), "\xff", "a\xc3"} {
		if err := ValidKey(k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
}

func FuzzValidKey(f *testing.F) {
	f.Add("a/b")
	f.Add("\xff")
	f.Fuzz(func(t *testing.T, k string) {
		err := ValidKey(k)
		want := k != "" && len(k) <= MaxKeyLen && strings.ToValidUTF8(k, "\uFFFD") == k
		if (err == nil) != want {
			t.Fatalf("ValidKey(%q) = %v, want valid=%v", k, err, want)
		}
	})
}
