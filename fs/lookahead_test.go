package fs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stratafs/stratafs/meta"
	"github.com/stratafs/stratafs/object"
)

// A commit of this process makes a page read ahead forget the name it
// changed, and only that name: the rest of the page still answers, so a
// thread renaming the files of a directory in order keeps its page.
func TestPageForgetsChangedNames(t *testing.T) {
	var a lookahead
	p := &page{prefix: "d/", from: "d/a", to: "d/x", read: time.Now(),
		files: map[string]*meta.Version{"d/b": {Key: "d/b"}, "d/c": {Key: "d/c"}, "d/e": {Key: "d/e"}},
		dirs:  map[string]bool{"d/sub": true}}
	a.startLocked("d/", "d/a")
	a.walks[0].page = p

	a.changed("d/c")       // a file of the page
	a.changed("d/e/inner") // a key under a name of the page
	a.changed("d/y")       // past the page
	a.changed("other/b")   // another directory
	a.changed("d/a")       // before the page
	for key, want := range map[string]bool{
		"d/b": true, "d/c": false, "d/d": true, "d/e": false, // d/d: absent, as the page says
		"d/sub": false,               // a directory: its marker is asked for
		"d/y":   false, "d/a": false, // outside the page
	} {
		if got := p.answers(key); got != want {
			t.Errorf("after the commits, page answers %s: %v, want %v", key, got, want)
		}
	}
	w, got, _ := a.find("d/", "d/b", time.Now().Add(-time.Hour))
	if w == nil || got != p {
		t.Fatalf("find(d/b) = %v, %v: the commits dropped the page", w, got)
	}
}

// A commit that lands while a page is being read is marked in it too:
// the read may or may not have seen it.
func TestPageBeingReadLearnsOfCommits(t *testing.T) {
	var a lookahead
	a.mu.Lock()
	p := a.beginLocked("", "a")
	a.mu.Unlock()
	a.changed("m/deep/key") // the read's end is not known yet: it may cover m
	a.changed("z")
	p.files = map[string]*meta.Version{"b": {Key: "b"}, "z": {Key: "z"}}
	p.dirs = map[string]bool{}
	p.to = "z"
	for key, want := range map[string]bool{"b": true, "m": false, "z": false} {
		if got := p.answers(key); got != want {
			t.Errorf("page read across the commits answers %s: %v, want %v", key, got, want)
		}
	}
}

// A walk reads the page after its page in the background. A commit that
// lands once that page is read is marked in it as in the walk's page.
func TestNextPageLearnsOfCommits(t *testing.T) {
	f := newTestFsys(t)
	f.opts.EntryTimeout = time.Hour
	f.svc.Watch(func(c object.Change) { f.ahead.changed(c.Key) })
	ctx := context.Background()
	key := func(i int) string { return fmt.Sprintf("d/k%03d", i) }
	put := func(i int, body string) {
		if _, err := f.svc.Put(ctx, "bkt", key(i), strings.NewReader(body), object.PutOptions{Size: int64(len(body))}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		put(i, "old")
	}
	i := 0
	var next *page
	for ; next == nil; i++ { // a walk, until its next page is being read
		if _, err := f.stat(ctx, "d/", key(i)); err != nil {
			t.Fatal(err)
		}
		f.ahead.mu.Lock()
		if w := f.ahead.walks[len(f.ahead.walks)-1]; w.next != nil {
			next = w.next
		}
		f.ahead.mu.Unlock()
	}
	<-next.done
	later := i + firstPage + 5 // in the next page
	put(later, "newer")
	for ; i <= later; i++ {
		st, err := f.stat(ctx, "d/", key(i))
		if err != nil || st.File == nil {
			t.Fatalf("%s: %v, %v", key(i), st.File, err)
		}
		if want := int64(len("old")); i == later {
			want = int64(len("newer"))
			if st.File.Size != want {
				t.Errorf("%s after a newer version was put: %d bytes, want %d", key(i), st.File.Size, want)
			}
		}
	}
}
