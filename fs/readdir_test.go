package fs

import (
	"slices"
	"syscall"
	"testing"
)

func TestMergerLetsDirectoriesWinAndSkipsBadNames(t *testing.T) {
	m := merger{prefix: "p/"}
	var out []dirent
	file := func(name string) { out = m.key(out, dirent{name: name, mode: syscall.S_IFREG}, "p/"+name) }
	// Key order: "a" < "a-b" < "a-b/" < "a/" < "b" < "c" < "c/"; "p/"
	// itself (the marker) and "p//" (an empty name) are not entries.
	file("")
	out = m.dir(out, "p//")
	file("a")
	file("a-b")
	out = m.dir(out, "p/a-b/")
	out = m.dir(out, "p/a/")
	file("b")
	file("c")
	out = m.dir(out, "p/c/")
	file("..")
	out = m.end(out)
	var got []string
	for _, e := range out {
		kind := "f"
		if e.mode == syscall.S_IFDIR {
			kind = "d"
		}
		got = append(got, kind+":"+e.name)
	}
	want := []string{"d:a-b", "d:a", "f:b", "d:c"}
	if !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
}
