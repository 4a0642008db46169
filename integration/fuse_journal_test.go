package integration

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stratafs/stratafs/fs"
)

// TestFUSEListingsFollowQueuedRenames lists directories right after
// renames and unlinks whose commits are still queued in the mount's
// journal, and while they are being made: a listing shows a file once,
// under its old name or its new one, never both, and never a file
// unlinked before it started.
func TestFUSEListingsFollowQueuedRenames(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	for _, d := range []string{"d", "e", "busy"} {
		if err := os.Mkdir(f.path(d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 {
		name := fmt.Sprint("f", i)
		f.write("d/"+name, []byte("x"))
		steps := []struct{ op, from, to, dir, want string }{
			{"rename", "d/" + name, "d/r" + name, "d", "r" + name},
			{"rename", "d/r" + name, "e/" + name, "d", ""},
			{"", "", "", "e", name},
			{"unlink", "e/" + name, "", "e", ""},
		}
		for _, s := range steps {
			var err error
			switch s.op {
			case "rename":
				err = os.Rename(f.path(s.from), f.path(s.to))
			case "unlink":
				err = os.Remove(f.path(s.from))
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.names(s.dir), slices.DeleteFunc([]string{s.want}, func(n string) bool { return n == "" }); !slices.Equal(got, want) {
				t.Fatalf("iteration %d: after %s %s %s, %s lists %q, want %q", i, s.op, s.from, s.to, s.dir, got, want)
			}
		}
	}

	// One file renamed back and forth while the directory is listed.
	f.write("busy/a", []byte("x"))
	stop, renamed := make(chan struct{}), make(chan error)
	go func() {
		names := []string{"busy/a", "busy/b"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				renamed <- nil
				return
			default:
			}
			if err := os.Rename(f.path(names[i%2]), f.path(names[(i+1)%2])); err != nil {
				renamed <- err
				return
			}
		}
	}()
	var bad [][]string
	for range 2000 {
		if got := f.names("busy"); len(got) != 1 {
			bad = append(bad, got)
		}
	}
	close(stop)
	if err := <-renamed; err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("%d of 2000 listings during renames did not show the file once: %q", len(bad), bad[:min(len(bad), 5)])
	}
}
