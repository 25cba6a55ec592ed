// Package report turns a sync session's events (pkg/filesync, pkg/syncback,
// pkg/restart, pkg/forward, pkg/logs) into what the user reads: one text line
// per event, or NDJSON with -o json (a contract, see docs/reference.md), the
// dry run's preflight lines, the progress line on a terminal, and the
// question a held mass delete asks there. pkg/cmd makes a Printer and hands it
// to the sessions; this package never parses flags.
package report
