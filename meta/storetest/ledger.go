package storetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
)

// chunkRef returns a chunk id starting with b, so that cases can choose
// the order of their ids.
func chunkRef(b ...byte) [16]byte {
	var id [16]byte
	copy(id[:], b)
	return id
}

func showCondemned(cs []meta.Condemned, t0 time.Time) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%x@%v", c.Chunk[:2], c.Since.Sub(t0)))
	}
	return strings.Join(out, " ")
}

func (e *env) expectCondemned(call string, got []meta.Condemned, err error, want string) {
	e.t.Helper()
	if err != nil {
		e.t.Fatalf("%s: %v", call, err)
	}
	if s := showCondemned(got, e.now); s != want {
		e.t.Fatalf("%s:\n got %s\nwant %s", call, s, want)
	}
}

func testLedger(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	a, b, c, d, x := chunkRef(0x00, 0x01), chunkRef(0x10, 0xff), chunkRef(0x7f), chunkRef(0x80, 0x01), chunkRef(0xff, 0xfe)
	unknown := chunkRef(0x42)
	t0, t1 := e.now, e.now.Add(time.Hour)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(e.s.Condemn(e.ctx, t0, [][16]byte{c, a, b}))
	must(e.s.Condemn(e.ctx, t1, [][16]byte{x, c, d})) // c's record is replaced
	got, err := e.s.Condemnations(e.ctx, [][16]byte{x, unknown, a, c, d, b})
	e.expectCondemned("Condemnations", got, err, "0001@0s 10ff@0s 7f00@1h0m0s 8001@1h0m0s fffe@1h0m0s")
	got, err = e.s.Condemnations(e.ctx, [][16]byte{unknown})
	e.expectCondemned("Condemnations of an unknown chunk", got, err, "")
	got, err = e.s.Condemnations(e.ctx, nil)
	e.expectCondemned("Condemnations of none", got, err, "")

	// Pages resume after the last record, across the ids' leading bytes.
	var pages []string
	for after := (*[16]byte)(nil); ; {
		page, err := e.s.ListCondemned(e.ctx, after, 2)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, showCondemned(page, t0))
		if len(page) < 2 {
			break
		}
		after = &page[len(page)-1].Chunk
	}
	if want := "0001@0s 10ff@0s|7f00@1h0m0s 8001@1h0m0s|fffe@1h0m0s"; strings.Join(pages, "|") != want {
		t.Fatalf("ListCondemned by 2:\n got %s\nwant %s", strings.Join(pages, "|"), want)
	}
	got, err = e.s.ListCondemned(e.ctx, &unknown, 10)
	e.expectCondemned("ListCondemned after an unknown chunk", got, err, "7f00@1h0m0s 8001@1h0m0s fffe@1h0m0s")

	must(e.s.Pardon(e.ctx, [][16]byte{b, unknown, d}))
	got, err = e.s.ListCondemned(e.ctx, nil, meta.MaxLedgerBatch)
	e.expectCondemned("ListCondemned after Pardon", got, err, "0001@0s 7f00@1h0m0s fffe@1h0m0s")
	must(e.s.Condemn(e.ctx, t1, [][16]byte{b})) // condemned again
	must(e.s.Pardon(e.ctx, [][16]byte{a, c, x}))
	got, err = e.s.ListCondemned(e.ctx, nil, meta.MaxLedgerBatch)
	e.expectCondemned("ListCondemned after pardons", got, err, "10ff@1h0m0s")

	// The ledger belongs to no bucket.
	if err := e.s.DeleteBucket(e.ctx, e.b.Name); err != nil {
		t.Fatal(err)
	}
	got, err = e.s.Condemnations(e.ctx, [][16]byte{b})
	e.expectCondemned("Condemnations after DeleteBucket", got, err, "10ff@1h0m0s")

	tooMany := make([][16]byte, meta.MaxLedgerBatch+1)
	for call, err := range map[string]error{
		"Condemn":              e.s.Condemn(e.ctx, t0, tooMany),
		"Pardon":               e.s.Pardon(e.ctx, tooMany),
		"Condemnations":        second(e.s.Condemnations(e.ctx, tooMany)),
		"ListCondemned(limit)": second(e.s.ListCondemned(e.ctx, nil, meta.MaxLedgerBatch+1)),
		"ListCondemned(0)":     second(e.s.ListCondemned(e.ctx, nil, 0)),
		"Condemn(zero time)":   e.s.Condemn(e.ctx, time.Time{}, [][16]byte{a}),
	} {
		if !errors.Is(err, meta.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", call, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }

// testLedgerMany lists a full batch of random chunks back in pages, in
// order, each once.
func testLedgerMany(t *testing.T, open Opener) {
	e := newEnv(t, open, meta.Unversioned)
	ids := make([][16]byte, meta.MaxLedgerBatch)
	for i := range ids {
		rand.Read(ids[i][:])
	}
	if err := e.s.Condemn(e.ctx, e.now, ids); err != nil {
		t.Fatal(err)
	}
	got, err := e.s.Condemnations(e.ctx, ids)
	if err != nil || len(got) != len(ids) {
		t.Fatalf("Condemnations of %d condemned chunks: %d, %v", len(ids), len(got), err)
	}
	slices.SortFunc(ids, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	var listed [][16]byte
	for after := (*[16]byte)(nil); ; {
		page, err := e.s.ListCondemned(e.ctx, after, 300)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			if !c.Since.Equal(e.now) {
				t.Fatalf("chunk %x condemned since %v, want %v", c.Chunk, c.Since, e.now)
			}
			listed = append(listed, c.Chunk)
		}
		if len(page) < 300 {
			break
		}
		after = &page[len(page)-1].Chunk
	}
	if !slices.Equal(listed, ids) {
		t.Fatalf("listed %d chunks, not the %d condemned in id order", len(listed), len(ids))
	}
}
