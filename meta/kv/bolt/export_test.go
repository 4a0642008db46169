package bolt

import "os"

// FreelistStored reports whether the bbolt file at path names a stored
// free-page list (see freelistStored).
func FreelistStored(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return freelistStored(f), nil
}
