package meta

// LiveIter turns a history scan (every row, newest first per key) into a
// live one: each key's first row, and only when it is not a delete marker.
// Backends without an index of live heads (Cassandra) serve Live scans
// with it; it seeks past each key's older rows instead of reading them.
func LiveIter(it Iter) Iter { return &liveIter{Iter: it} }

type liveIter struct {
	Iter
	cur *Version
}

func (l *liveIter) Next() bool {
	for {
		if l.cur != nil {
			l.Iter.Seek(l.cur.Key+"\x00", VersionID{})
		}
		if !l.Iter.Next() {
			l.cur = nil
			return false
		}
		l.cur = l.Iter.Version()
		if !l.cur.DeleteMarker {
			return true
		}
	}
}

func (l *liveIter) Version() *Version { return l.cur }

func (l *liveIter) Seek(key string, _ VersionID) {
	l.cur = nil
	l.Iter.Seek(key, VersionID{})
}
