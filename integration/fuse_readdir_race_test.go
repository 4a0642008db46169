package integration

import (
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stratafs/stratafs/fs"
)

// TestFUSEReaddirRacesCommits lists a directory bigger than a page of the
// store's listing, and its .versions directory, over and over while files
// are created in it (written ones, whose close queues their version, and
// empty ones, committed at their release), rewritten, chmodded, renamed
// and unlinked, so that commits land between and during the reads of
// every page. Each listing must hold every name that was there before it
// started and was not removed meanwhile, and no name twice.
func TestFUSEReaddirRacesCommits(t *testing.T) {
	f := newFUSEMount(t, fs.Options{})
	if err := os.Mkdir(f.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	const stable = 1500 // two pages of the store's listing
	var stables []string
	for i := range stable {
		stables = append(stables, fmt.Sprintf("s%04d", i))
	}
	parallel(t, 4, len(stables), func(i int) error { return os.WriteFile(f.path("d/"+stables[i]), []byte("x"), 0o644) })

	// closed holds the names created during the test, once their close
	// returned; written tells those that were written (their version is
	// queued by the close, not by the release).
	var mu sync.Mutex
	var closed []string
	written := map[string]bool{}
	seen := func() ([]string, map[string]bool) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(closed), maps.Clone(written)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	run := func(work func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := work(i); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for w := range 2 {
		run(func(i int) error { // creates, half of them empty
			name := fmt.Sprintf("n%d-%05d", w, i)
			var err error
			if i%2 == 0 {
				err = os.WriteFile(f.path("d/"+name), []byte("y"), 0o644)
			} else {
				var file *os.File
				if file, err = os.Create(f.path("d/" + name)); err == nil {
					err = file.Close()
				}
			}
			mu.Lock()
			closed = append(closed, name)
			written[name] = i%2 == 0
			mu.Unlock()
			return err
		})
	}
	run(func(i int) error { // rewrites and chmods of names that stay
		name := f.path("d/" + stables[(i*37)%stable])
		if i%2 == 0 {
			return os.WriteFile(name, []byte("z"), 0o644)
		}
		return os.Chmod(name, os.FileMode(0o600|i%2*0o44))
	})
	run(func(i int) error { // renames and unlinks: may show or not
		a, b := f.path(fmt.Sprintf("d/t%02d-a", i%20)), f.path(fmt.Sprintf("d/t%02d-b", i%20))
		switch i / 20 % 3 {
		case 0:
			return os.WriteFile(a, []byte("t"), 0o644)
		case 1:
			return os.Rename(a, b)
		}
		return os.Remove(b)
	})

	// check lists dir in batches (the kernel asks again and again) and
	// reports what is missing or repeated.
	check := func(dir string, want []string) error {
		d, err := os.Open(f.path(dir))
		if err != nil {
			return err
		}
		defer d.Close()
		got := map[string]int{}
		for {
			names, err := d.Readdirnames(300)
			for _, n := range names {
				got[n]++
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
		}
		var missing, twice []string
		for _, n := range want {
			if got[n] == 0 {
				missing = append(missing, n)
			}
		}
		for n, k := range got {
			if k > 1 {
				twice = append(twice, n)
			}
		}
		if len(missing) > 0 || len(twice) > 0 {
			return fmt.Errorf("%s: %d of %d entries missing (%q…), %d listed twice (%q…)",
				dir, len(missing), len(want), missing[:min(len(missing), 5)], len(twice), twice[:min(len(twice), 5)])
		}
		return nil
	}
	deadline := time.Now().Add(8 * time.Second)
	listings := 0
	for ; time.Now().Before(deadline); listings++ {
		names, written := seen()
		want := append(slices.Clone(stables), names...)
		if err := check("d", want); err != nil {
			t.Errorf("listing %d: %v", listings, err)
		}
		if listings%4 == 0 {
			// .versions shows versions once committed: the empty files
			// closed may have none yet.
			committed := slices.DeleteFunc(want, func(n string) bool { _, made := written[n]; return made && !written[n] })
			if err := check(".versions/d", committed); err != nil {
				t.Errorf("listing %d: %v", listings, err)
			}
		}
	}
	close(stop)
	wg.Wait()
	names, _ := seen()
	if err := check("d", append(stables, names...)); err != nil {
		t.Errorf("after the changes: %v", err)
	}
	t.Logf("%d listings while %d files were created", listings, len(names))
}

// parallel runs fn(0), …, fn(n-1) on threads goroutines.
func parallel(t *testing.T, threads, n int, fn func(i int) error) {
	t.Helper()
	next := make(chan int)
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// TestFUSEReaddirRightAfterCreates is the bench's create then readdir:
// files created by 4 threads, then the directory listed by 4 threads at
// once right after the last close (commits may still be queued), and
// again once they are committed.
func TestFUSEReaddirRightAfterCreates(t *testing.T) {
	f := newFUSEMount(t, fs.Options{EntryTimeout: time.Second, AttrTimeout: time.Second})
	const files = 2000
	if err := os.Mkdir(f.path("d"), 0o755); err != nil {
		t.Fatal(err)
	}
	block := fuseRandom(4096)
	parallel(t, 4, files, func(i int) error { return os.WriteFile(f.path(fmt.Sprintf("d/f%06d", i)), block, 0o644) })
	for pass := range 2 {
		parallel(t, 4, 8, func(int) error {
			ents, err := os.ReadDir(f.path("d"))
			if err == nil && len(ents) != files {
				err = fmt.Errorf("pass %d: readdir found %d entries, want %d", pass, len(ents), files)
			}
			return err
		})
		f.settle()
	}
}
