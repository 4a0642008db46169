//go:build race

package data_test

// raceEnabled is set under the race detector, which makes sync.Pool drop
// items at random: allocation counts mean nothing then.
const raceEnabled = true
