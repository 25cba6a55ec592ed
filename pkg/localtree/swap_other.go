//go:build !linux && !darwin

package localtree

import "os"

// swap: no atomic exchange here (see replace's fallback).
func swap(*os.File, string, string) error { return errNoSwap }

// renameNoReplace: no atomic no-replace rename here (see replace's fallback).
func renameNoReplace(*os.File, string, string) error { return errNoSwap }
