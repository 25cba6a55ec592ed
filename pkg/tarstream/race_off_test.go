//go:build !race

package tarstream

// raceOn: see race_on_test.go.
const raceOn = false
