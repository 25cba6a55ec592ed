//go:build !race

package remote

// raceOn: see race_on_test.go.
const raceOn = false
