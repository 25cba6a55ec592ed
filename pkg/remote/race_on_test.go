//go:build race

package remote

// raceOn: the race detector is on, which drops sync.Pool items at random and
// allocates on its own, so allocation counts say nothing.
const raceOn = true
