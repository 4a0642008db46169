package gc

import (
	"context"
	"errors"
	"fmt"

	"github.com/stratafs/stratafs/data"
	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A bucketPass walks one bucket: its rows, key by key through the
// retention policy if there is one, then its uploads. A run resumed at a
// checkpoint walks the bucket it names in two passes: the keys after the
// checkpoint's first, then, once every other bucket is done, those up to
// it (through).
type bucketPass struct {
	r       *run
	b       meta.Bucket
	policy  *object.Policy // nil: nothing expires
	after   string         // the key the rows start after; "" for the first
	through string         // the last key walked; "" for the bucket's last, and its uploads

	key     string          // the key whose rows are streaming past
	ended   string          // the last key whose rows all streamed past
	pass    *object.KeyPass // its judge
	skipped bool            // an expiry of key was skipped: keep its marker
	pending []object.Expiry // this page's expiries, applied at its end
}

func (p *bucketPass) run(ctx context.Context) error {
	err := p.rows(ctx)
	if err == nil && p.through == "" {
		p.r.st.Buckets++
		err = p.uploads(ctx)
	}
	if err != nil {
		return fmt.Errorf("bucket %s: %w", p.b.Name, err)
	}
	return nil
}

// rows walks the bucket's rows a page at a time. Each page resumes after
// the previous page's last row by its sort id (not its wire id, which is
// "null" for a null row, whose position is lost once it is removed), so
// rows removed meanwhile make it neither skip nor repeat any.
func (p *bucketPass) rows(ctx context.Context) error {
	o := meta.VersionListOptions{KeyMarker: p.after, MaxKeys: meta.MaxListKeys}
	for {
		page, err := meta.ListVersions(ctx, p.r.meta, p.b, o)
		if err != nil {
			return err
		}
		var ids []data.ChunkID
		end := !page.IsTruncated || len(page.Versions) == 0
		for _, e := range page.Versions {
			if p.through != "" && e.Key > p.through {
				end = true
				break
			}
			ids = p.row(ctx, ids, e.Version)
		}
		if end {
			p.endKey()
		}
		p.r.sw.mark(ids)
		if err := p.flush(ctx); err != nil {
			return err
		}
		if p.ended != "" {
			p.r.progressed(ctx, p.b, p.ended)
		}
		p.r.report("scan", p.b.Name, p.key)
		if end {
			return nil
		}
		last := page.Versions[len(page.Versions)-1]
		o.KeyMarker, o.VersionIDMarker = last.Key, last.ID.String()
	}
}

// row judges one row; the chunks of those that stay are appended to ids.
func (p *bucketPass) row(ctx context.Context, ids []data.ChunkID, v *meta.Version) []data.ChunkID {
	p.r.st.Rows++
	if v.Key != p.key {
		p.endKey()
		p.key, p.skipped = v.Key, false
		if p.policy != nil {
			p.pass = p.policy.Key(v.Key)
		}
	}
	if p.pass != nil {
		if e, ok := p.pass.Row(v); ok {
			p.pending = append(p.pending, e)
			return ids
		}
	}
	return p.keep(ctx, ids, v)
}

// keep marks a row that stays, checking its chunks in fsck.
func (p *bucketPass) keep(ctx context.Context, ids []data.ChunkID, v *meta.Version) []data.ChunkID {
	m := p.r.manifest(v.Manifest, func() string { return fmt.Sprintf("%s/%s@%s", p.b.Name, v.Key, v.WireID()) })
	if m == nil {
		return ids
	}
	if p.r.check != nil {
		p.r.probe(ctx, m, Missing{Bucket: p.b.Name, Key: v.Key, VersionID: v.WireID()}, func() bool {
			_, err := p.r.meta.Get(ctx, p.b, v.Key, v.ID)
			return err == nil
		})
	}
	return append(ids, m.ChunkIDs()...)
}

// endKey ends the current key's pass: its delete marker may go.
func (p *bucketPass) endKey() {
	if p.key != "" {
		p.ended = p.key
	}
	if p.pass != nil && !p.skipped {
		if e, ok := p.pass.End(); ok {
			p.pending = append(p.pending, e)
		}
	}
	p.pass = nil
}

// flush applies the pending expiries and marks the rows they leave: the
// versions a delete marker hides, and those whose expiry no longer held.
func (p *bucketPass) flush(ctx context.Context) error {
	if len(p.pending) == 0 {
		return nil
	}
	applied := p.pending
	if !p.r.o.DryRun {
		var err error
		if applied, err = p.r.svc.Expire(ctx, p.b, p.pending); err != nil {
			return err
		}
	}
	done := make(map[*meta.Version]bool, len(applied))
	for _, e := range applied {
		done[e.Version] = true
		p.r.tally(e)
	}
	var ids []data.ChunkID
	for _, e := range p.pending {
		if done[e.Version] && e.Removes(p.b.Versioning) {
			continue
		}
		ids = p.keep(ctx, ids, e.Version)
		if !done[e.Version] && e.Version.Key == p.key {
			p.skipped = true
		}
	}
	p.r.sw.mark(ids)
	p.pending = p.pending[:0]
	return nil
}

// tally counts an applied expiry.
func (r *run) tally(e object.Expiry) {
	switch e.Action {
	case object.ExpireCurrent:
		r.st.CurrentExpired++
	case object.ExpireNoncurrent:
		r.st.NoncurrentExpired++
	case object.RemoveMarker:
		r.st.MarkersRemoved++
	}
}

// uploads walks the bucket's multipart uploads: it aborts those the
// policy says are stale, drops the records of uploads completed long
// enough ago, and marks the parts of the others.
func (p *bucketPass) uploads(ctx context.Context) error {
	o := meta.UploadListOptions{Limit: meta.MaxListKeys, Completed: true}
	for {
		us, err := p.r.meta.ListUploads(ctx, p.b, o)
		if err != nil {
			return err
		}
		for _, u := range us {
			if err := p.upload(ctx, u); err != nil {
				return err
			}
		}
		if len(us) < o.Limit {
			return nil
		}
		o.AfterKey, o.AfterID = us[len(us)-1].Key, us[len(us)-1].ID
	}
}

func (p *bucketPass) upload(ctx context.Context, u *meta.Upload) error {
	if u.State == meta.Completed {
		// The record has no parts left: it only answers a repeated Complete.
		if p.r.now.Sub(u.Version.Time()) < p.r.o.CompletedUploads {
			return nil
		}
		p.r.st.UploadsDropped++
		return p.expireUpload(ctx, u)
	}
	if p.policy != nil {
		if rule, ok := p.policy.AbortUpload(u); ok {
			p.r.st.UploadsAborted++
			p.r.log.Info("abort incomplete upload", "bucket", p.b.Name, "key", u.Key, "upload", u.ID, "rule", rule, "dry_run", p.r.o.DryRun)
			return p.expireUpload(ctx, u)
		}
	}
	for after := int32(0); ; {
		parts, err := p.r.meta.Parts(ctx, p.b, u.Key, u.ID, after, meta.MaxListKeys)
		if errors.Is(err, meta.ErrNoSuchUpload) { // aborted or completed meanwhile
			return nil
		}
		if err != nil {
			return err
		}
		var ids []data.ChunkID
		for _, pt := range parts {
			p.r.st.Parts++
			ids = p.part(ctx, ids, u, pt)
			after = pt.Number
		}
		p.r.sw.mark(ids)
		if len(parts) < meta.MaxListKeys {
			return nil
		}
	}
}

// part marks an upload part, checking its chunks in fsck.
func (p *bucketPass) part(ctx context.Context, ids []data.ChunkID, u *meta.Upload, pt *meta.Part) []data.ChunkID {
	m := p.r.manifest(pt.Manifest, func() string {
		return fmt.Sprintf("part %d of upload %s of %s/%s", pt.Number, u.ID, p.b.Name, u.Key)
	})
	if m == nil {
		return ids
	}
	if p.r.check != nil {
		p.r.probe(ctx, m, Missing{Bucket: p.b.Name, Key: u.Key, UploadID: u.ID, Part: pt.Number}, func() bool {
			_, err := p.r.meta.Upload(ctx, p.b, u.Key, u.ID)
			return err == nil
		})
	}
	return append(ids, m.ChunkIDs()...)
}

func (p *bucketPass) expireUpload(ctx context.Context, u *meta.Upload) error {
	if p.r.o.DryRun {
		return nil
	}
	if err := p.r.svc.ExpireUpload(ctx, p.b, u); err != nil && !errors.Is(err, meta.ErrNoSuchUpload) {
		return err
	}
	return nil
}
