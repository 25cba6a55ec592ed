//go:build race

package planner

// raceOn: the race detector is on, and sync.Pool drops a quarter of what is put in it.
const raceOn = true
