// A CPU profile of the whole run for the bench (test/bench), which
// measures where a start's time goes and what each replica of a fan-out
// costs the client. Nothing happens unless the
// environment names a file in cpuProfileEnv. Not for users.

package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// cpuProfileEnv names the file the profile goes to; unset,
// startCPUProfile does nothing.
const cpuProfileEnv = "LIVESYNC_CPU_PROFILE"

// startCPUProfile profiles the process when cpuProfileEnv is set; the
// returned func writes the profile. A failure is said on stderr and
// otherwise ignored: the profile is the bench's concern, never the session's.
func startCPUProfile() (stop func()) {
	name := os.Getenv(cpuProfileEnv)
	if name == "" {
		return func() {}
	}
	f, err := os.Create(name)
	if err == nil {
		if err = pprof.StartCPUProfile(f); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "cpuprof: %s: %v\n", name, err)
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "cpuprof: %s: %v\n", name, err)
		}
	}
}
