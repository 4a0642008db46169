package data

import "sync"

// pools holds a *sync.Pool of *[]byte per buffer size, so that a steady
// stream of writes and reads reuses a few chunk buffers instead of
// allocating (and collecting) one per chunk.
var pools sync.Map // int → *sync.Pool

func pool(size int) *sync.Pool {
	if p, ok := pools.Load(size); ok {
		return p.(*sync.Pool)
	}
	p, _ := pools.LoadOrStore(size, &sync.Pool{New: func() any {
		b := make([]byte, size)
		return &b
	}})
	return p.(*sync.Pool)
}

// getBuf returns a buffer of len size.
func getBuf(size int) *[]byte { return pool(size).Get().(*[]byte) }

// putBuf returns a buffer from getBuf for reuse.
func putBuf(b *[]byte) { pool(len(*b)).Put(b) }
