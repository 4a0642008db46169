package object

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// This file holds the operations the FUSE mount needs to show a bucket as
// a directory tree: a key is a file; "d/" (a directory marker) and every
// key under it make d a directory. Each question the tree asks is answered
// by one ordered scan, and a directory moves in one commit.

// ErrTooManyKeys means an operation on every key under a prefix found more
// keys than the limit it was given, and changed nothing.
var ErrTooManyKeys = errors.New("too many keys under the prefix")

// maxAttrRetries bounds how often UpdateAttrs starts over when another
// write lands between its read and its commit.
const maxAttrRetries = 5

// A Node is what a path names in the directory view of a bucket: a file,
// a directory, both (S3 allows "a" beside "a/b"), or nothing. Its rows
// are attributes only (meta.Version.NoManifest; Whole reads one whole):
// a lookup wants no more, and a small file's inline bytes are most of
// its row.
type Node struct {
	// File is the key's latest version; nil when the key has none.
	File *meta.Version
	// Dir is set when some key lies under key+"/".
	Dir bool
	// Marker is the first row of key+"/" itself, the directory marker
	// that carries a directory's attributes; nil when there is none.
	Marker *meta.Version
}

// Stat returns what key names among the live keys: its latest version
// unless deleted, and whether a live key lies under key+"/". It is one
// live scan with one seek, so a directory of any size costs the same.
func (s *Service) Stat(ctx context.Context, bucket, key string) (Node, error) {
	return s.stat(ctx, bucket, key, true)
}

// StatHistory is Stat over every row ever written: File is the key's
// newest row even when it is a delete marker, and Dir is set when any
// row, deleted or old, lies under key+"/". The mount's .versions tree
// uses it to find names that no longer exist.
func (s *Service) StatHistory(ctx context.Context, bucket, key string) (Node, error) {
	return s.stat(ctx, bucket, key, false)
}

func (s *Service) stat(ctx context.Context, bucket, key string, live bool) (Node, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return Node{}, err
	}
	it := s.meta.Scan(ctx, b, meta.ScanOptions{Prefix: key, Live: live, Attrs: true})
	defer it.Close()
	var n Node
	if it.Next() && it.Version().Key == key {
		n.File = it.Version()
		n.File.DropManifest()
	}
	// key+"/" sorts before every other key under it, so the first row
	// under it is the marker when there is one.
	dir := key + "/"
	it.Seek(dir, meta.VersionID{})
	if it.Next() {
		v := it.Version()
		n.Dir = strings.HasPrefix(v.Key, dir)
		if v.Key == dir {
			v.DropManifest()
			n.Marker = v
		}
	}
	if err := it.Err(); err != nil {
		return Node{}, fmt.Errorf("stat %s/%s: %w", bucket, key, err)
	}
	return n, nil
}

// VersionAt returns the newest row of key not newer than at (the version
// that was latest at that instant, a delete marker included), or
// meta.ErrNoSuchVersion when key has no row that old. It seeks straight
// to it, however many versions the key has.
func (s *Service) VersionAt(ctx context.Context, bucket, key string, at time.Time) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	it := s.meta.Scan(ctx, b, meta.ScanOptions{Prefix: key})
	defer it.Close()
	it.Seek(key, meta.AsOf(at))
	if it.Next() && it.Version().Key == key {
		return it.Version(), nil
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%s/%s at %s: %w", bucket, key, at.Format(time.RFC3339Nano), err)
	}
	return nil, fmt.Errorf("%s/%s at %s: %w", bucket, key, at.Format(time.RFC3339Nano), meta.ErrNoSuchVersion)
}

// RenamePrefix moves every live key under the prefix src to the same name
// under dst, as Rename moves one key: new versions sharing the chunks and
// the DELETE of each source, all in one commit (atomic on backends with
// multi-key transactions). A commit must hold every key, so more than
// limit keys under src fail with ErrTooManyKeys before anything is
// written. Both prefixes end in "/" and neither may contain the other. It
// returns the number of keys moved; none at all is meta.ErrNoSuchKey.
func (s *Service) RenamePrefix(ctx context.Context, bucket, src, dst, owner string, limit int) (int, error) {
	n, err := s.renamePrefix(ctx, bucket, src, dst, owner, limit)
	if err != nil {
		return 0, fmt.Errorf("rename %s/%s to %s: %w", bucket, src, dst, err)
	}
	return n, nil
}

func (s *Service) renamePrefix(ctx context.Context, bucket, src, dst, owner string, limit int) (int, error) {
	if !strings.HasSuffix(src, "/") || !strings.HasSuffix(dst, "/") ||
		strings.HasPrefix(src, dst) || strings.HasPrefix(dst, src) {
		return 0, fmt.Errorf("prefixes must end in / and be disjoint: %w", meta.ErrInvalidArgument)
	}
	b, err := s.target(ctx, bucket, dst)
	if err != nil {
		return 0, err
	}
	it := s.meta.Scan(ctx, b, meta.ScanOptions{Prefix: src, Live: true, Attrs: true})
	defer it.Close()
	var ms []meta.Mutation
	for it.Next() {
		if len(ms) == 2*limit {
			return 0, fmt.Errorf("more than %d keys: %w", limit, ErrTooManyKeys)
		}
		head := it.Version()
		head.DropManifest() // the store reads it as the rows commit (see share)
		key := dst + strings.TrimPrefix(head.Key, src)
		if err := meta.ValidKey(key); err != nil {
			return 0, err
		}
		v := share(head, key, CopyOptions{Owner: owner})
		v.ID = meta.NewVersionID(s.now())
		del, _ := meta.DeleteMutation(b, head.Key, owner, s.now())
		del.Check = unchanged(head)
		ms = append(ms, meta.PutMutation(b, v), del)
	}
	if err := it.Err(); err != nil {
		return 0, err
	}
	if len(ms) == 0 {
		return 0, meta.ErrNoSuchKey
	}
	if err := s.apply(ctx, b, ms...); err != nil {
		return 0, err
	}
	return len(ms) / 2, nil
}

// unchanged is a commit check that the key's head is still the version a
// write was derived from, so that a write racing in is not lost unseen.
func unchanged(head *meta.Version) func(*meta.Version) error {
	return func(cur *meta.Version) error {
		if cur == nil || cur.ID != head.ID {
			return fmt.Errorf("%s changed meanwhile: %w", head.Key, meta.ErrConflict)
		}
		return nil
	}
}

// UpdateAttrs writes a metadata-only new version of key that shares the
// latest version's bytes: fn edits a copy of that version's attributes
// (chmod, chown, utimes and setxattr in the mount). The version fn saw
// must still be the latest when the row commits; when another write
// lands in between, UpdateAttrs starts over from the new latest version,
// so fn may run more than once. Checksums are kept: the bytes are the
// same.
func (s *Service) UpdateAttrs(ctx context.Context, bucket, key string, fn func(v *meta.Version, a *Attrs) error) (*meta.Version, error) {
	var err error
	for range maxAttrRetries {
		var v *meta.Version
		v, err = s.updateAttrs(ctx, bucket, key, fn)
		if !errors.Is(err, meta.ErrConflict) {
			return v, err
		}
	}
	return nil, err
}

func (s *Service) updateAttrs(ctx context.Context, bucket, key string, fn func(*meta.Version, *Attrs) error) (*meta.Version, error) {
	b, err := s.target(ctx, bucket, key)
	if err != nil {
		return nil, err
	}
	head, err := s.Head(ctx, bucket, key, "")
	if err != nil {
		return nil, err
	}
	a := Attrs{
		Content:      head.Content,
		UserMeta:     maps.Clone(head.UserMeta),
		StorageClass: head.StorageClass,
		Checksums:    head.Checksums,
	}
	if head.POSIX != nil {
		p := *head.POSIX
		a.POSIX = &p
	}
	if err := fn(head, &a); err != nil {
		return nil, err
	}
	v := share(head, key, CopyOptions{Replace: &a})
	if err := s.commit(ctx, b, v, unchanged(head)); err != nil {
		return nil, fmt.Errorf("update attributes of %s/%s: %w", bucket, key, err)
	}
	return v, nil
}
