package s3

import (
	"strconv"
	"strings"
)

// parseRange resolves a Range header against an object of size bytes.
// ok is false when the whole object is to be served: no header, or one
// S3 ignores (not a single bytes range, or not well formed).
// errInvalidRange means the range is well formed but selects nothing.
func parseRange(h string, size int64) (off, n int64, ok bool, err error) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found {
		return 0, 0, false, nil
	}
	first, last, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false, nil
	}
	if first == "" { // suffix: the last N bytes
		suffix, valid := digits(last)
		switch {
		case !valid:
			return 0, 0, false, nil
		case suffix == 0 || size == 0:
			return 0, 0, false, errInvalidRange
		}
		suffix = min(suffix, size)
		return size - suffix, suffix, true, nil
	}
	start, valid := digits(first)
	if !valid {
		return 0, 0, false, nil
	}
	end := size - 1
	if last != "" {
		if end, valid = digits(last); !valid || end < start {
			return 0, 0, false, nil
		}
		end = min(end, size-1)
	}
	if start >= size {
		return 0, 0, false, errInvalidRange
	}
	return start, end - start + 1, true, nil
}

// digits parses a non-negative decimal number of plain digits (no sign).
func digits(s string) (int64, bool) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
