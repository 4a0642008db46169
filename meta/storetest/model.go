package storetest

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"

	"github.com/stratafs/stratafs/meta"
)

// model is the suite's reference store: one bucket's rows in scan order
// (key ascending, newest first within a key), changed exactly as
// meta.Store.Commit documents, and its multipart uploads. Every page the
// suite expects is computed from it by the plain loops below, never by
// the code under test.
type model struct {
	rows    []*meta.Version
	uploads []modelUpload // in (key, id) order
}

// A modelUpload is an upload and its parts in number order. Both are
// replaced, never changed in place, once the model holds them.
type modelUpload struct {
	u     *meta.Upload
	parts []*meta.Part
}

// search returns the index of row (key, id), or where it would be.
func (m *model) search(key string, id meta.VersionID) (int, bool) {
	return slices.BinarySearchFunc(m.rows, key, func(v *meta.Version, k string) int {
		if c := strings.Compare(v.Key, k); c != 0 {
			return c
		}
		return v.ID.Compare(id)
	})
}

// key returns the rows of key, newest first.
func (m *model) key(key string) []*meta.Version {
	i, _ := m.search(key, meta.VersionID{})
	j := i
	for j < len(m.rows) && m.rows[j].Key == key {
		j++
	}
	return m.rows[i:j]
}

// head returns the first row of key, or nil.
func (m *model) head(key string) *meta.Version {
	if rs := m.key(key); len(rs) > 0 {
		return rs[0]
	}
	return nil
}

// attrsOnly returns a copy of v without its manifest, as Check sees a
// head; nil for nil.
func attrsOnly(v *meta.Version) *meta.Version {
	if v == nil {
		return nil
	}
	c := *v
	c.DropManifest()
	return &c
}

// null returns the null row of key, or nil.
func (m *model) null(key string) *meta.Version {
	for _, v := range m.key(key) {
		if v.Null {
			return v
		}
	}
	return nil
}

// commit applies ms in order, all or none, and returns the error the
// store must return: ErrInvalidKey, a Check's error, ErrNoSuchVersion or
// ErrNoSuchUpload.
func (m *model) commit(ms ...meta.Mutation) error {
	next := &model{rows: slices.Clone(m.rows), uploads: slices.Clone(m.uploads)}
	for _, mu := range ms {
		if err := next.apply(mu); err != nil {
			return err
		}
	}
	*m = *next
	return nil
}

func (m *model) apply(mu meta.Mutation) error {
	if mu.Put != nil {
		if err := meta.ValidKey(mu.Key); err != nil {
			return meta.ErrInvalidKey
		}
	}
	if mu.Check != nil {
		if err := mu.Check(attrsOnly(m.head(mu.Key))); err != nil {
			return err
		}
	}
	put := mu.Put
	if put != nil && put.ManifestOf != nil {
		var origin *meta.Version
		if i, ok := m.search(put.ManifestOf.Key, put.ManifestOf.ID); ok {
			origin = m.rows[i]
		}
		shared, err := put.Sharing(origin)
		if err != nil {
			return sentinel(err, meta.ErrConflict, meta.ErrInvalidArgument)
		}
		put = shared
	}
	if n := m.null(mu.Key); mu.DropNull && n != nil {
		m.remove(n.Key, n.ID)
	}
	if !mu.Delete.IsZero() && !m.remove(mu.Key, mu.Delete) {
		return meta.ErrNoSuchVersion
	}
	if put != nil {
		v := clone(put)
		i, _ := m.search(v.Key, v.ID)
		m.rows = slices.Insert(m.rows, i, v)
	}
	if mu.CompleteUpload != "" {
		i, ok := m.searchUpload(mu.Key, mu.CompleteUpload)
		if !ok || m.uploads[i].u.State != meta.Completing {
			return meta.ErrNoSuchUpload
		}
		u := *m.uploads[i].u
		u.State = meta.Completed
		m.uploads[i] = modelUpload{u: &u}
	}
	return nil
}

// sentinel returns the first of sentinels that err wraps: the error the
// model expects of the store.
func sentinel(err error, sentinels ...error) error {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

func (m *model) remove(key string, id meta.VersionID) bool {
	i, ok := m.search(key, id)
	if ok {
		m.rows = slices.Delete(m.rows, i, i+1)
	}
	return ok
}

// live returns, for each key, its newest row whose id is not below at
// (meta.AsOf of an instant; the zero id admits every row), leaving out
// keys where that row is a delete marker.
func (m *model) live(at meta.VersionID) []*meta.Version {
	var out []*meta.Version
	for i := 0; i < len(m.rows); {
		key := m.rows[i].Key
		var found *meta.Version
		for ; i < len(m.rows) && m.rows[i].Key == key; i++ {
			if found == nil && m.rows[i].ID.Compare(at) >= 0 {
				found = m.rows[i]
			}
		}
		if found != nil && !found.DeleteMarker {
			out = append(out, found)
		}
	}
	return out
}

// An entry is one item of a listing: a row or a common prefix.
type entry struct {
	v      *meta.Version
	latest bool // v is the first row of its key among all rows
	prefix string
}

func (e entry) name() string {
	if e.v == nil {
		return e.prefix
	}
	return e.v.Key
}

// entries lists the rows under prefix, each key that has delim after the
// prefix rolled up into its common prefix. Rows must be in scan order.
func entries(rows []*meta.Version, prefix, delim string) []entry {
	var out []entry
	for i, v := range rows {
		if !strings.HasPrefix(v.Key, prefix) {
			continue
		}
		if j := strings.Index(v.Key[len(prefix):], delim); delim != "" && j >= 0 {
			cp := v.Key[:len(prefix)+j+len(delim)]
			if n := len(out); n == 0 || out[n-1].prefix != cp {
				out = append(out, entry{prefix: cp})
			}
			continue
		}
		out = append(out, entry{v: v, latest: i == 0 || rows[i-1].Key != v.Key})
	}
	return out
}

// A page is what one listing call should return.
type page struct {
	entries   []entry
	truncated bool
}

// cut drops the leading entries skip reports and keeps a page of MaxKeys
// max of the rest.
func cut(es []entry, skip func(entry) bool, max int) page {
	for len(es) > 0 && skip(es[0]) {
		es = es[1:]
	}
	if n := pageSize(max); len(es) > n {
		return page{entries: es[:n], truncated: true}
	}
	return page{entries: es}
}

// pageSize is the number of entries a page of MaxKeys n holds.
func pageSize(n int) int {
	if n <= 0 || n > meta.MaxListKeys {
		return meta.MaxListKeys
	}
	return n
}

// list is the page meta.List (at zero) or meta.ListAsOf should return.
// Starting after o.After is starting after every entry not above it: a
// common prefix that o.After rolls up into is not above it either.
func (m *model) list(at meta.VersionID, o meta.ListOptions) page {
	es := entries(m.live(at), o.Prefix, o.Delimiter)
	return cut(es, func(e entry) bool { return e.name() <= o.After }, o.MaxKeys)
}

// versions is the page meta.ListVersions should return.
func (m *model) versions(o meta.VersionListOptions) (page, error) {
	if o.VersionIDMarker != "" && o.KeyMarker == "" {
		return page{}, meta.ErrInvalidArgument
	}
	skip := func(e entry) bool { return e.name() <= o.KeyMarker }
	if o.VersionIDMarker != "" {
		id, err := m.markerID(o.KeyMarker, o.VersionIDMarker)
		if err != nil {
			return page{}, err
		}
		skip = func(e entry) bool {
			if e.v == nil || e.v.Key != o.KeyMarker {
				return e.name() <= o.KeyMarker
			}
			return e.v.ID.Compare(id) <= 0
		}
	}
	return cut(entries(m.rows, o.Prefix, o.Delimiter), skip, o.MaxKeys), nil
}

// markerID resolves a version-id-marker. A "null" marker of a key without
// a null row resumes after the whole key, like the engine.
func (m *model) markerID(key, marker string) (meta.VersionID, error) {
	if marker != meta.NullVersion {
		return meta.ParseVersionID(marker)
	}
	if n := m.null(key); n != nil {
		return n.ID, nil
	}
	var last meta.VersionID
	for i := range last {
		last[i] = 0xff
	}
	return last, nil
}

// searchUpload returns the index of upload (key, id), or where it would be.
func (m *model) searchUpload(key, id string) (int, bool) {
	return slices.BinarySearchFunc(m.uploads, [2]string{key, id}, func(mu modelUpload, t [2]string) int {
		return cmp.Or(strings.Compare(mu.u.Key, t[0]), strings.Compare(mu.u.ID, t[1]))
	})
}

// upload returns upload (key, id) with its parts, or nil.
func (m *model) upload(key, id string) *modelUpload {
	if i, ok := m.searchUpload(key, id); ok {
		return &m.uploads[i]
	}
	return nil
}

// createUpload records a copy of u.
func (m *model) createUpload(u *meta.Upload) {
	i, _ := m.searchUpload(u.Key, u.ID)
	m.uploads = slices.Insert(m.uploads, i, modelUpload{u: cloneUpload(u)})
}

// updateUpload applies fn to a copy of upload (key, id) as UpdateUpload
// documents and returns the result, or the error the store must return:
// ErrNoSuchUpload, fn's, or ErrInvalidArgument when fn changed the key or
// id, or moved the upload past Uploading without a version id.
func (m *model) updateUpload(key, id string, fn func(*meta.Upload) error) (*meta.Upload, error) {
	mu := m.upload(key, id)
	if mu == nil {
		return nil, meta.ErrNoSuchUpload
	}
	u := cloneUpload(mu.u)
	if err := fn(u); err != nil {
		return nil, err
	}
	if u.Key != key || u.ID != id || u.State != meta.Uploading && u.Version.IsZero() {
		return nil, meta.ErrInvalidArgument
	}
	mu.u = cloneUpload(u)
	return u, nil
}

// deleteUpload removes upload (key, id) and its parts.
func (m *model) deleteUpload(key, id string) error {
	i, ok := m.searchUpload(key, id)
	if !ok {
		return meta.ErrNoSuchUpload
	}
	m.uploads = slices.Delete(m.uploads, i, i+1)
	return nil
}

// listUploads is the page ListUploads should return; o.Limit must be
// positive.
func (m *model) listUploads(o meta.UploadListOptions) []*meta.Upload {
	var out []*meta.Upload
	for _, mu := range m.uploads {
		u := mu.u
		switch {
		case !strings.HasPrefix(u.Key, o.Prefix), u.State == meta.Completed && !o.Completed:
		case o.AfterKey != "" && (u.Key < o.AfterKey || u.Key == o.AfterKey && (o.AfterID == "" || u.ID <= o.AfterID)):
		case len(out) < o.Limit:
			out = append(out, u)
		}
	}
	return out
}

// putPart stores a copy of p in upload (key, id), replacing a part of the
// same number, and returns the error the store must return.
func (m *model) putPart(key, id string, p *meta.Part) error {
	if p.Number < 1 || p.Number > meta.MaxParts {
		return meta.ErrInvalidArgument
	}
	mu := m.upload(key, id)
	if mu == nil || mu.u.State != meta.Uploading {
		return meta.ErrNoSuchUpload
	}
	i, found := slices.BinarySearchFunc(mu.parts, p.Number, func(q *meta.Part, n int32) int { return cmp.Compare(q.Number, n) })
	parts := slices.Clone(mu.parts)
	if found {
		parts[i] = clonePart(p)
	} else {
		parts = slices.Insert(parts, i, clonePart(p))
	}
	mu.parts = parts
	return nil
}

// partsAfter is the page Parts should return; limit must be positive.
func (m *model) partsAfter(key, id string, after int32, limit int) ([]*meta.Part, error) {
	mu := m.upload(key, id)
	if mu == nil {
		return nil, meta.ErrNoSuchUpload
	}
	var out []*meta.Part
	for _, p := range mu.parts {
		if p.Number > after && len(out) < limit {
			out = append(out, p)
		}
	}
	return out, nil
}

// cloneUpload returns a deep copy of u.
func cloneUpload(u *meta.Upload) *meta.Upload {
	c := *u
	if u.Template != nil {
		c.Template = clone(u.Template)
	}
	return &c
}

// clonePart returns a deep copy of p.
func clonePart(p *meta.Part) *meta.Part {
	c := *p
	c.Checksums = maps.Clone(p.Checksums)
	c.Manifest = slices.Clone(p.Manifest)
	return &c
}

// clone returns a deep copy of v.
func clone(v *meta.Version) *meta.Version {
	c := *v
	c.UserMeta = maps.Clone(v.UserMeta)
	c.Checksums = maps.Clone(v.Checksums)
	c.Manifest = slices.Clone(v.Manifest)
	if v.POSIX != nil {
		p := *v.POSIX
		c.POSIX = &p
	}
	return &c
}
