package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// MaxListKeys is the most entries one listing page returns (S3's cap).
const MaxListKeys = 1000

// ListOptions select a page of ListObjects (v1 and v2) or of an as-of
// listing.
type ListOptions struct {
	Prefix    string
	Delimiter string
	// After starts the page after this key (v1 marker, v2 start-after or
	// the key a continuation token carries). When After rolls up into a
	// common prefix under Delimiter, the page starts after that prefix.
	After string
	// MaxKeys bounds keys plus common prefixes in the page; values above
	// MaxListKeys, and 0 or less ("not given"), mean MaxListKeys. S3's
	// explicit max-keys=0 (an empty page) is the front end's to answer.
	MaxKeys int
	// Attrs lists the rows' attributes only: their manifests are left
	// out (Version.NoManifest). A small object's bytes are inline in its
	// manifest, most of its row: a listing that shows names and sizes
	// need not read them.
	Attrs bool
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects        []*Version // latest live row per key, in key order
	CommonPrefixes []string
	IsTruncated    bool
	// Next is the last key or common prefix of the page: the marker (v1
	// NextMarker, v2 continuation) from which the following page starts.
	Next string
}

// VersionListOptions select a page of ListObjectVersions.
type VersionListOptions struct {
	Prefix    string
	Delimiter string
	// KeyMarker and VersionIDMarker (wire form, "null" allowed) start the
	// page after that row; KeyMarker alone starts after every row of it.
	KeyMarker       string
	VersionIDMarker string
	MaxKeys         int
}

// VersionEntry is a row of a versions listing.
type VersionEntry struct {
	*Version
	IsLatest bool
}

// VersionListResult is one page of ListObjectVersions.
type VersionListResult struct {
	Versions            []VersionEntry // rows and delete markers, (key, newest first)
	CommonPrefixes      []string
	IsTruncated         bool
	NextKeyMarker       string
	NextVersionIDMarker string
}

// List returns a page of ListObjects: the latest row of each live key
// under o.Prefix, with keys rolled up into common prefixes at o.Delimiter.
// It reads the backend's live scan, so deleted keys and old versions cost
// nothing on backends that index live heads.
func List(ctx context.Context, s Store, b Bucket, o ListOptions) (*ListResult, error) {
	it := s.Scan(ctx, b, ScanOptions{Prefix: o.Prefix, Live: true, Attrs: o.Attrs})
	defer it.Close()
	res, err := listKeys(it, o)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s: %w", b.Name, o.Prefix, err)
	}
	return res, nil
}

// ListAsOf is List over the bucket as it was at instant at: for each key
// its newest row not newer than at, hidden when that row is a delete
// marker or when the key has no row that old.
func ListAsOf(ctx context.Context, s Store, b Bucket, at time.Time, o ListOptions) (*ListResult, error) {
	it := s.Scan(ctx, b, ScanOptions{Prefix: o.Prefix, Attrs: o.Attrs})
	defer it.Close()
	res, err := listKeys(&asOfIter{Iter: it, at: AsOf(at)}, o)
	if err != nil {
		return nil, fmt.Errorf("list %s/%s as of %s: %w", b.Name, o.Prefix, at.Format(time.RFC3339Nano), err)
	}
	return res, nil
}

// listKeys pages through an iterator that yields at most one row per key.
func listKeys(it Iter, o ListOptions) (*ListResult, error) {
	max := pageSize(o.MaxKeys)
	res := &ListResult{}
	if o.After != "" && o.After >= o.Prefix {
		start, ok := resume(o.Prefix, o.Delimiter, o.After)
		if !ok {
			return res, nil
		}
		it.Seek(start, VersionID{})
	}
	var err error
	res.IsTruncated, err = walk(it, o.Prefix, o.Delimiter, max, nil,
		func(v *Version) {
			res.Objects = append(res.Objects, v)
			res.Next = v.Key
		},
		func(cp string) {
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			res.Next = cp
		})
	if o.Attrs {
		for _, v := range res.Objects {
			v.DropManifest()
		}
	}
	return res, err
}

// ListVersions returns a page of ListObjectVersions: every row under
// o.Prefix, newest first within a key, with IsLatest set on the first row
// of each key, and keys rolled up into common prefixes at o.Delimiter.
func ListVersions(ctx context.Context, s Store, b Bucket, o VersionListOptions) (*VersionListResult, error) {
	res, err := listVersions(ctx, s, b, o)
	if err != nil {
		return nil, fmt.Errorf("list versions %s/%s: %w", b.Name, o.Prefix, err)
	}
	return res, nil
}

func listVersions(ctx context.Context, s Store, b Bucket, o VersionListOptions) (*VersionListResult, error) {
	if o.VersionIDMarker != "" && o.KeyMarker == "" {
		return nil, fmt.Errorf("version-id-marker without key-marker: %w", ErrInvalidArgument)
	}
	max := pageSize(o.MaxKeys)
	res := &VersionListResult{}
	it := s.Scan(ctx, b, ScanOptions{Prefix: o.Prefix})
	defer it.Close()

	// prev is the key of the last row handed out: the next row of the same
	// key is not the latest. Resuming inside a key starts with it set.
	var prev string
	var skip *VersionID // the marker row itself, met first after the seek
	if o.KeyMarker != "" && o.KeyMarker >= o.Prefix {
		start, ok := resume(o.Prefix, o.Delimiter, o.KeyMarker)
		switch {
		case !ok:
			return res, nil
		case start != o.KeyMarker+"\x00" || o.VersionIDMarker == "":
			it.Seek(start, VersionID{})
		default:
			id, err := markerID(ctx, s, b, o.KeyMarker, o.VersionIDMarker)
			switch {
			case errors.Is(err, ErrNoSuchVersion):
				// The null row is gone, so its position is unknown:
				// resume at the next key.
				it.Seek(start, VersionID{})
			case err != nil:
				return nil, err
			default:
				// Ids are totally ordered, so the page resumes right
				// after the marker even if that row was removed since.
				// The rows that follow are not the latest unless every
				// row up to the marker is gone.
				head, err := Latest(ctx, s, b, o.KeyMarker)
				if err != nil && !errors.Is(err, ErrNoSuchKey) {
					return nil, err
				}
				if err == nil && head.ID.Compare(id) <= 0 {
					prev = o.KeyMarker
				}
				skip = &id
				it.Seek(o.KeyMarker, id)
			}
		}
	}
	// The first row after the seek may be the marker row itself.
	isMarker := func(v *Version) bool {
		marker := skip != nil && v.Key == o.KeyMarker && v.ID == *skip
		skip = nil
		return marker
	}
	var err error
	res.IsTruncated, err = walk(it, o.Prefix, o.Delimiter, max, isMarker,
		func(v *Version) {
			res.Versions = append(res.Versions, VersionEntry{Version: v, IsLatest: v.Key != prev})
			prev = v.Key
			res.NextKeyMarker, res.NextVersionIDMarker = v.Key, v.WireID()
		},
		func(cp string) {
			res.CommonPrefixes = append(res.CommonPrefixes, cp)
			res.NextKeyMarker, res.NextVersionIDMarker = cp, ""
		})
	if !res.IsTruncated {
		res.NextKeyMarker, res.NextVersionIDMarker = "", ""
	}
	return res, err
}

// markerID resolves a version-id-marker to the sort id it stands for.
func markerID(ctx context.Context, s Store, b Bucket, key, wireID string) (VersionID, error) {
	if wireID != NullVersion {
		return ParseVersionID(wireID)
	}
	v, err := s.GetNull(ctx, b, key)
	if err != nil {
		return VersionID{}, err
	}
	return v.ID, nil
}

// walk pages through the rows under prefix. A row that rolls up into a
// common prefix at delim reports the prefix once (common) and the rest of
// it is skipped by seeking, not read; any other row goes to row, unless
// skip says to pass it over. Keys and common prefixes each count toward
// max; walk reports whether another entry followed the page.
func walk(it Iter, prefix, delim string, max int, skip func(*Version) bool, row func(*Version), common func(string)) (truncated bool, err error) {
	n := 0
	for it.Next() {
		v := it.Version()
		if !strings.HasPrefix(v.Key, prefix) {
			break
		}
		if skip != nil && skip(v) {
			continue
		}
		if n == max {
			return true, it.Err()
		}
		n++
		if cp, ok := rollup(prefix, delim, v.Key); ok {
			common(cp)
			if !skipPrefix(it, cp) {
				break
			}
			continue
		}
		row(v)
	}
	return false, it.Err()
}

func pageSize(n int) int {
	if n <= 0 || n > MaxListKeys {
		return MaxListKeys
	}
	return n
}

// rollup reports the common prefix key falls under: the part of key up to
// and including the first delimiter after prefix.
func rollup(prefix, delim, key string) (string, bool) {
	if delim == "" {
		return "", false
	}
	i := strings.Index(key[len(prefix):], delim)
	if i < 0 {
		return "", false
	}
	return key[:len(prefix)+i+len(delim)], true
}

// resume returns the position a page starts at after marker: past the
// marker's common prefix when it rolls up into one (so a page ending in a
// common prefix is not repeated), else just past the marker's rows. ok is
// false when nothing can follow.
func resume(prefix, delim, marker string) (start string, ok bool) {
	if strings.HasPrefix(marker, prefix) {
		if cp, rolled := rollup(prefix, delim, marker); rolled {
			end := PrefixEnd(cp)
			return end, end != ""
		}
	}
	return marker + "\x00", true
}

// skipPrefix seeks past every key under cp; false when nothing can follow.
func skipPrefix(it Iter, cp string) bool {
	end := PrefixEnd(cp)
	if end == "" {
		return false
	}
	it.Seek(end, VersionID{})
	return true
}

// asOfIter turns a history scan into the view at one instant: for each key
// its first row at or after the id AsOf(at) — the newest row not newer
// than at — hidden when that row is a delete marker. Rows newer than the
// instant are skipped by seeking, not read one by one.
type asOfIter struct {
	Iter
	at  VersionID
	cur *Version
}

func (a *asOfIter) Next() bool {
	for {
		if a.cur != nil {
			a.Iter.Seek(a.cur.Key+"\x00", VersionID{})
			a.cur = nil
		}
		if !a.Iter.Next() {
			return false
		}
		v := a.Iter.Version()
		if v.ID.Compare(a.at) < 0 {
			a.Iter.Seek(v.Key, a.at)
			continue
		}
		a.cur = v
		if !v.DeleteMarker {
			return true
		}
	}
}

func (a *asOfIter) Version() *Version { return a.cur }

func (a *asOfIter) Seek(key string, _ VersionID) {
	a.cur = nil
	a.Iter.Seek(key, VersionID{})
}
