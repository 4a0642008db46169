package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

func testRoundTrip(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	manifest := make([]byte, 4096)
	for i := range manifest {
		manifest[i] = byte(i * 7)
	}
	full := e.row("dir/файл 1.txt")
	full.Size = 1<<40 + 3
	full.ETag = "0123456789abcdef0123456789abcdef-3"
	full.Content = meta.Content{
		Type:         "text/plain; charset=utf-8",
		Encoding:     "gzip",
		Disposition:  `attachment; filename="f.txt"`,
		Language:     "de-CH",
		CacheControl: "max-age=60",
		Expires:      "Wed, 21 Oct 2026 07:28:00 GMT",
	}
	full.UserMeta = map[string]string{"color": "blue", "name": "grüße", "empty": ""}
	full.POSIX = &meta.POSIX{Mode: 0o100640, UID: 1000, GID: 100, Mtime: time.Unix(1700000000, 123456789)}
	full.StorageClass = "STANDARD_IA"
	full.Checksums = map[string]string{"CRC32": "AAAAAA==", "SHA256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}
	full.Owner = "AKIAIOSFODNN7EXAMPLE"
	full.Manifest = manifest

	link := e.row("dir/link")
	link.POSIX = &meta.POSIX{Mode: 0o120777, Mtime: time.Unix(-1, 999999999).UTC(), Symlink: "../target/ü"}
	dir := e.row("dir/")
	dir.POSIX = &meta.POSIX{Mode: 0o40755, UID: 1, GID: 2, Mtime: time.Unix(0, 1)}

	for _, v := range []*meta.Version{full, link, dir, e.row("bare")} {
		e.mustCommit(meta.PutMutation(e.b, v))
	}
	mu, marker := meta.DeleteMutation(e.b, "gone", "AKIAOWNER", e.tick())
	e.mustCommit(mu)
	e.setVersioning(meta.Suspended)
	null := e.row("dir/null")
	null.UserMeta = map[string]string{"x": "y"}
	e.mustCommit(meta.PutMutation(e.b, null))

	for _, want := range []*meta.Version{full, link, dir, marker, null} {
		got, err := e.s.Get(e.ctx, e.b, want.Key, want.ID)
		e.expectRow(fmt.Sprintf("Get(%q)", want.Key), got, err, want, meta.ErrNoSuchVersion)
	}
	// A listing of attributes only has every field but the manifest.
	res, err := meta.List(e.ctx, e.s, e.b, meta.ListOptions{Attrs: true})
	if err != nil {
		t.Fatalf("List(attrs): %v", err)
	}
	var want []*meta.Version
	for _, v := range e.m.live(meta.VersionID{}) {
		w := *v
		w.Manifest, w.NoManifest = nil, true
		want = append(want, &w)
	}
	e.expectRows("List(attrs)", res.Objects, want)
	res, err = meta.ListAsOf(e.ctx, e.s, e.b, e.tick(), meta.ListOptions{Attrs: true})
	if err != nil {
		t.Fatalf("ListAsOf(attrs): %v", err)
	}
	e.expectRows("ListAsOf(attrs)", res.Objects, want)
	e.expectState()
}

func testCheck(t *testing.T, open Opener) {
	refuse := errors.New("precondition failed")
	for _, c := range []struct {
		name  string
		state meta.Versioning
		fill  func(e *env) *meta.Version // returns k's head
	}{
		{"no rows", meta.Enabled, func(e *env) *meta.Version { return nil }},
		{"live head", meta.Enabled, func(e *env) *meta.Version { e.put("k"); return e.put("k") }},
		{"marker head", meta.Enabled, func(e *env) *meta.Version { e.put("k"); return e.del("k") }},
		{"null head", meta.Suspended, func(e *env) *meta.Version { return e.put("k") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, open, c.state)
			e.put("kk")
			head := c.fill(e)
			var seen []*meta.Version // heads passed to Check: once by the model, then by the store
			check := func(err error) func(*meta.Version) error {
				return func(h *meta.Version) error {
					seen = append(seen, h)
					return err
				}
			}
			expectSeen := func() {
				t.Helper()
				for _, h := range seen {
					if !sameRow(h, attrsOnly(head)) {
						t.Fatalf("Check saw head %s, want its attributes %s", show(h), show(attrsOnly(head)))
					}
				}
				if len(seen) < 2 {
					t.Fatal("the store did not call Check")
				}
				seen = nil
			}

			// A failing Check aborts its mutation and every other one.
			e.commit(meta.Mutation{Key: "k", Check: check(refuse), DropNull: true, Put: e.row("k")})
			expectSeen()
			e.commit(meta.PutMutation(e.b, e.row("other")), meta.Mutation{Key: "k", Check: check(refuse), Put: e.row("k")})
			expectSeen()
			e.expectState()

			e.mustCommit(meta.Mutation{Key: "k", Check: check(nil), Put: e.row("k")})
			expectSeen()
			e.expectState()
		})
	}
}

// testShare writes rows that take their manifest from another row as
// they commit (Version.ManifestOf), as a rename and a change of attributes
// in the mount do: the row named may be another key's, or the row the
// mutation itself replaces or removes.
func testShare(t *testing.T, open Opener) {
	for _, state := range []meta.Versioning{meta.Enabled, meta.Suspended} {
		t.Run(state.String(), func(t *testing.T) {
			e := newEnv(t, open, state)
			// Every third row's manifest is as long as a small file's bytes.
			for range 3 {
				src := e.put("src")
				renamed := sharing(e.row("dst"), src)
				mu, _ := meta.DeleteMutation(e.b, "src", "", e.tick())
				e.mustCommit(meta.PutMutation(e.b, renamed), mu)
				chmod := sharing(e.row("dst"), renamed) // replaces renamed when suspended
				e.mustCommit(meta.PutMutation(e.b, chmod))
				last := chmod
				if state == meta.Enabled {
					last = sharing(e.row("dst"), chmod)
					e.mustCommit(meta.Mutation{Key: "dst", Delete: chmod.ID, Put: last})
				}
				got, err := e.s.Get(e.ctx, e.b, "dst", last.ID)
				if err != nil || !bytes.Equal(got.Manifest, src.Manifest) || got.NoManifest || got.ManifestOf != nil {
					t.Fatalf("Get of a row sharing %s's manifest: %s, %v", show(src), show(got), err)
				}
				e.expectState()
			}

			// A row gone, or a delete marker, fails the commit and writes
			// nothing.
			gone := sharing(e.row("k"), &meta.Version{Key: "src", ID: meta.NewVersionID(e.tick())})
			e.commit(meta.PutMutation(e.b, e.row("other")), meta.PutMutation(e.b, gone))
			e.put("src")
			marker := e.del("src")
			e.commit(meta.PutMutation(e.b, sharing(e.row("k"), marker)))
			// A row must either carry its manifest or name the row it
			// shares, not both nor neither.
			head := e.put("k")
			both := sharing(e.row("k"), head)
			both.Manifest = []byte("m")
			neither := e.row("k")
			neither.DropManifest()
			for _, v := range []*meta.Version{both, neither} {
				if err := e.s.Commit(e.ctx, e.b, meta.PutMutation(e.b, v)); !errors.Is(err, meta.ErrInvalidArgument) {
					t.Fatalf("Commit of %s: %v, want ErrInvalidArgument", show(v), err)
				}
			}
			e.expectState()
		})
	}
}

// sharing makes v, a new row, take its manifest from origin's row.
func sharing(v, origin *meta.Version) *meta.Version {
	v.DropManifest()
	v.ManifestOf = &meta.RowRef{Key: origin.Key, ID: origin.ID}
	return v
}

func testErrors(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Enabled)
	e.put("j")
	older := e.put("k")
	e.put("k")
	e.put("k/")
	stranger := e.put("kk")
	e.del("kk")

	// Ids of no row of k: fresh, another key's, and one between k's rows.
	for _, id := range []meta.VersionID{meta.NewVersionID(e.tick()), stranger.ID, meta.AsOf(older.ID.Time().Add(time.Second / 2))} {
		e.commit(meta.Mutation{Key: "k", Delete: id})
		e.commit(meta.Mutation{Key: "k", Delete: id, Put: e.row("k")})
		e.commit(meta.PutMutation(e.b, e.row("new")), meta.Mutation{Key: "k", Delete: id})
		e.expectGone("k", id)
		e.expectGone("missing", id)
	}
	e.expectGone("k", meta.VersionID{})
	e.expectNull("k")
	e.expectLatest("missing")
	e.expectLatest("k/x")
	e.expectLatest("kk") // a delete marker
	if _, err := meta.Lookup(e.ctx, e.s, e.b, "k", "not-a-version"); !errors.Is(err, meta.ErrInvalidVersionID) {
		t.Fatalf("Lookup of a malformed id: %v, want ErrInvalidVersionID", err)
	}
	e.expectState()
}

func testInvalidKeys(t *testing.T, open Opener) {
	for _, c := range []struct {
		name, key string
	}{
		{"empty", ""},
		{"1025 bytes", strings.Repeat("k", meta.MaxKeyLen+1)},
		{"1025 bytes of runes", strings.Repeat("é", meta.MaxKeyLen/2) + "k"},
		{"invalid UTF-8", "k\xff"},
		{"truncated rune", "k\xe6\x97"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, open, meta.Enabled)
			e.commit(meta.PutMutation(e.b, e.row(c.key))) // the model expects ErrInvalidKey
			e.setVersioning(meta.Suspended)
			e.commit(meta.PutMutation(e.b, e.row(c.key)))
			e.expectState()
			// The longest valid key is a key like any other.
			e.put(strings.Repeat("é", meta.MaxKeyLen/2))
			e.expectState()
		})
	}
}
