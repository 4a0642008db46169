package gc

import (
	"testing"
	"time"
)

// SetCheckpointEvery makes runs save their checkpoint every d (0: after
// every page of rows) until the test ends.
func SetCheckpointEvery(t testing.TB, d time.Duration) {
	old := checkpointEvery
	checkpointEvery = d
	t.Cleanup(func() { checkpointEvery = old })
}
