package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Scripts of sync-back (see Scan and Download).
var (
	scanScript        = script("scan.sh")
	downloadScript    = script("download.sh")
	incarnationScript = script("incarnation.sh")
)

// Incarnation returns which incarnation of t's container it is now, as
// ScanResult.Incarnation names it; "" when the container does not say.
func Incarnation(ctx context.Context, ex Executor, t Target) (string, error) {
	var out bytes.Buffer
	err := Run(ctx, ex, t, "reading the container's incarnation", "/", []string{"sh", "-c", incarnationScript, "livesync-incarnation"}, nil, &out)
	return strings.TrimSpace(out.String()), err
}

// ScanArgv is the exec that runs scan.sh in the remote directory root: the
// entries under starts ("./name", one component each) that changed since
// the container time since (seconds), or all of them when since is 0.
// hashed holds find tests in pairs (a test such as "-path", then its
// pattern; see ignore.Globs.FileTests) that a file must pass one of for a full
// listing to hash it; with none, or more than maxHashTests or
// maxHashTestBytes of them, it hashes every file.
func ScanArgv(root string, since int64, starts, hashed []string) []string {
	s := ""
	if since > 0 {
		s = strconv.FormatInt(since, 10)
	}
	var tests []string
	if n := len(hashed) / 2; n > 0 && n <= maxHashTests && len(hashed)%2 == 0 {
		size := 0
		for i := 0; i < len(hashed); i += 2 {
			tests = append(tests, "!", hashed[i], hashed[i+1])
			size += len(hashed[i+1])
		}
		if size > maxHashTestBytes {
			tests = nil
		}
	}
	out := make([]string, 0, 8+len(starts)+len(tests))
	out = append(out, "sh", "-c", scanScript, "livesync-scan", root, s, listChunkScript, strconv.Itoa(len(tests)))
	out = append(out, starts...)
	return append(out, tests...)
}

// The bounds of ScanArgv's hash tests. Globs are the user's and few; past
// these, a full listing hashes every file rather than send an argv (or a
// stream frame) that grows with them, and have find test each entry
// against that many patterns.
const (
	maxHashTests     = 64
	maxHashTestBytes = 4 << 10
)

// ScanResult is what scan.sh printed (its header describes the format).
type ScanResult struct {
	// Now is the container's clock when the scan started, in seconds.
	Now int64
	// Incarnation names the container the scan ran in (its mount
	// namespace); "" when the container does not say.
	Incarnation string
	// Since: only entries changed since the time asked for are listed
	// (with the entries of every directory that changed); else all of them.
	Since bool
	// Missing holds the start points that do not exist.
	Missing []string
	// Complete: every find finished cleanly, so an entry missing from a
	// listed directory is gone.
	Complete bool
	*Listing
}

// Scan runs ScanArgv in t and parses what it prints. A scan that failed
// or was cut short is an error, never an empty result.
func Scan(ctx context.Context, ex Executor, t Target, root string, since int64, starts, hashed []string) (*ScanResult, error) {
	var out bytes.Buffer
	if err := Run(ctx, ex, t, "scanning for sync-back", root, ScanArgv(root, since, starts, hashed), nil, &out); err != nil {
		return nil, err
	}
	r, err := ParseScan(out.Bytes())
	if err != nil {
		return nil, fmt.Errorf("scanning %q in %s: %w", root, t, err)
	}
	return r, nil
}

// ParseScan parses scan.sh's output. Output without its final token is an
// error: a scan cut short says nothing about what is gone.
func ParseScan(b []byte) (*ScanResult, error) {
	t := &tokens{b: b}
	magic, _ := t.next()
	now, _ := t.next()
	inc, _ := t.next()
	since, ok := t.next()
	if magic != "SB1" || !ok {
		return nil, errors.New("unexpected output from the scan script")
	}
	n, err := strconv.ParseInt(now, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("scan output: bad container time %q", now)
	}
	r := &ScanResult{Now: n, Incarnation: inc, Since: since == "newer"}
	for bytes.HasPrefix(t.b, []byte("M\x00")) {
		t.next()
		name, ok := t.next()
		if !ok {
			return nil, errors.New("scan output is truncated")
		}
		r.Missing = append(r.Missing, name)
	}
	if r.Listing, err = parseListing(t); err != nil {
		return nil, err
	}
	switch st, _ := t.next(); st {
	case "OK":
		r.Complete = true
	case "PARTIAL":
	default:
		return nil, errors.New("scan output is truncated")
	}
	if len(t.b) != 0 {
		return nil, errors.New("unexpected output after the scan")
	}
	return r, nil
}

// DownloadArgv is the exec that runs download.sh: a tar of names
// ("./"-prefixed) in the remote directory root, on stdout, gzip-compressed
// with gz where the container has gzip.
func DownloadArgv(root string, gz bool, names []string) []string {
	z := ""
	if gz {
		z = "z"
	}
	out := []string{"sh", "-c", downloadScript, "livesync-download", root, z}
	return append(out, names...)
}
