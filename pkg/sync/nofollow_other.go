//go:build !unix

package sync

const oNoFollow = 0
