package data

// SIMDAfter is simdAfter, for the tests of package data_test.
const SIMDAfter = simdAfter

// Hashing reports how many bodies Write is hashing.
func Hashing() int64 { return hashing.Load() }

// SIMDServed reports how many md5-simd hashers have been handed out.
func SIMDServed() int {
	simd.Lock()
	defer simd.Unlock()
	return simd.served
}
