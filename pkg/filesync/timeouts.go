package filesync

import "time"

// Default deadlines; see Config.ExecTimeout and Config.OnSyncTimeout.
const (
	DefaultExecTimeout   = 30 * time.Second
	DefaultOnSyncTimeout = 30 * time.Second
)

// treeBytes is the file content of a local tree.
func treeBytes(tree map[string]Entry) int64 {
	var n int64
	for _, e := range tree {
		if e.Type == TypeFile {
			n += e.Size
		}
	}
	return n
}
