package fs

import (
	"context"
	"maps"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	fusefs "github.com/hanwen/go-fuse/v2/fs"
	"golang.org/x/sys/unix"
)

// Extended attributes in the "user." namespace are the version's user
// metadata, the x-amz-meta-* headers of S3: set one in the mount and read
// it over S3, and back. Like header names, attribute names are
// case-insensitive and stored lowercased; names and values must fit in an
// HTTP header (printable, UTF-8). Other namespaces are not supported.
const userPrefix = "user."

// metaNode is a node with user metadata: a file's, or the marker's of a
// directory.
type metaNode interface {
	// userMeta returns the metadata; the caller must not modify it.
	userMeta(ctx context.Context) (map[string]string, syscall.Errno)
	// updateUserMeta applies fn to a copy of the metadata and stores the
	// result as a new version (or in the pending one of a file being
	// written).
	updateUserMeta(ctx context.Context, fn func(map[string]string) error) syscall.Errno
}

var (
	_ = (fusefs.NodeGetxattrer)((*node)(nil))
	_ = (fusefs.NodeSetxattrer)((*node)(nil))
	_ = (fusefs.NodeRemovexattrer)((*node)(nil))
	_ = (fusefs.NodeListxattrer)((*node)(nil))
)

func (n *node) metadata() metaNode { return n.Operations().(metaNode) }

func (n *node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	name, ok := strings.CutPrefix(attr, userPrefix)
	if !ok {
		// Asked on every write (security.capability): answer without
		// reading the store.
		return 0, syscall.ENODATA
	}
	m, errno := n.metadata().userMeta(ctx)
	if errno != 0 {
		return 0, errno
	}
	v, ok := m[strings.ToLower(name)]
	if !ok {
		return 0, syscall.ENODATA
	}
	return copyOut(dest, []byte(v))
}

func (n *node) Listxattr(ctx context.Context, dest []byte) (uint32, syscall.Errno) {
	ctx = uninterrupted(ctx)
	m, errno := n.metadata().userMeta(ctx)
	if errno != 0 {
		return 0, errno
	}
	var list []byte
	for _, k := range slices.Sorted(maps.Keys(m)) {
		list = append(append(list, userPrefix+k...), 0)
	}
	return copyOut(dest, list)
}

// copyOut answers a get or list: the size alone for an empty buffer,
// ERANGE for one too small.
func copyOut(dest, b []byte) (uint32, syscall.Errno) {
	switch {
	case len(dest) == 0:
		return uint32(len(b)), 0
	case len(dest) < len(b):
		return uint32(len(b)), syscall.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

func (n *node) Setxattr(ctx context.Context, attr string, value []byte, flags uint32) syscall.Errno {
	name, ok := strings.CutPrefix(attr, userPrefix)
	if !ok {
		return syscall.ENOTSUP
	}
	name = strings.ToLower(name)
	if !headerToken(name) || !headerValue(value) {
		return syscall.EINVAL
	}
	return n.metadata().updateUserMeta(ctx, func(m map[string]string) error {
		_, exists := m[name]
		switch {
		case flags&unix.XATTR_CREATE != 0 && exists:
			return syscall.EEXIST
		case flags&unix.XATTR_REPLACE != 0 && !exists:
			return syscall.ENODATA
		}
		m[name] = string(value)
		return nil
	})
}

func (n *node) Removexattr(ctx context.Context, attr string) syscall.Errno {
	name, ok := strings.CutPrefix(attr, userPrefix)
	if !ok {
		return syscall.ENODATA
	}
	name = strings.ToLower(name)
	return n.metadata().updateUserMeta(ctx, func(m map[string]string) error {
		if _, ok := m[name]; !ok {
			return syscall.ENODATA
		}
		delete(m, name)
		return nil
	})
}

// cloneMeta returns a copy of m that can be written to.
func cloneMeta(m map[string]string) map[string]string {
	c := maps.Clone(m)
	if c == nil {
		c = map[string]string{}
	}
	return c
}

// headerToken reports whether name can be an HTTP header name (RFC 9110
// token) once prefixed with x-amz-meta-.
func headerToken(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// headerValue reports whether v can be sent as a header value.
func headerValue(v []byte) bool {
	if !utf8.Valid(v) {
		return false
	}
	for _, c := range v {
		if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
