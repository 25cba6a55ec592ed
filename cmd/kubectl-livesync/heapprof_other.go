//go:build !unix

package main

// startHeapProfiles does nothing here: the bench that reads the profiles
// runs on Linux (see heapprof.go).
func startHeapProfiles() (stop func()) { return func() {} }
