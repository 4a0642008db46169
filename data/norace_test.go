//go:build !race

package data_test

const raceEnabled = false
