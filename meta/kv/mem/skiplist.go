package mem

import (
	"bytes"
	"math/bits"
	"math/rand/v2"
)

// maxLevel suits up to 4^maxLevel entries: each level holds about a
// quarter of the nodes of the one below.
const maxLevel = 16

// list is an ordered map from byte keys to byte values: a skip list. It is
// not safe for concurrent use; the engine's lock guards it.
type list struct {
	head  node // a sentinel before every key
	level int  // levels in use
}

type node struct {
	key, val []byte
	next     []*node // next[i] is the following node at level i
}

func newList() *list {
	return &list{head: node{next: make([]*node, maxLevel)}, level: 1}
}

// path returns, for each level, the last node before k.
func (l *list) path(k []byte) [maxLevel]*node {
	var prev [maxLevel]*node
	n := &l.head
	for i := l.level - 1; i >= 0; i-- {
		for n.next[i] != nil && bytes.Compare(n.next[i].key, k) < 0 {
			n = n.next[i]
		}
		prev[i] = n
	}
	return prev
}

// seek returns the first node with a key at or after k, or nil.
func (l *list) seek(k []byte) *node {
	return l.path(k)[0].next[0]
}

// get returns k's value and whether k is present.
func (l *list) get(k []byte) ([]byte, bool) {
	if n := l.seek(k); n != nil && bytes.Equal(n.key, k) {
		return n.val, true
	}
	return nil, false
}

// set stores v under k and returns the value it replaced, if any.
func (l *list) set(k, v []byte) (old []byte, existed bool) {
	prev := l.path(k)
	if n := prev[0].next[0]; n != nil && bytes.Equal(n.key, k) {
		old, n.val = n.val, v
		return old, true
	}
	// A geometric level: two random bits per level, so p = 1/4.
	lvl := min(1+bits.TrailingZeros64(rand.Uint64())/2, maxLevel)
	for ; l.level < lvl; l.level++ {
		prev[l.level] = &l.head
	}
	n := &node{key: k, val: v, next: make([]*node, lvl)}
	for i := range lvl {
		n.next[i], prev[i].next[i] = prev[i].next[i], n
	}
	return nil, false
}

// del removes k and returns the value it had, if any.
func (l *list) del(k []byte) (old []byte, existed bool) {
	prev := l.path(k)
	n := prev[0].next[0]
	if n == nil || !bytes.Equal(n.key, k) {
		return nil, false
	}
	for i := range n.next {
		prev[i].next[i] = n.next[i]
	}
	return n.val, true
}
