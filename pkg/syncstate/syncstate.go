// Package syncstate keeps a sync's ancestor between sessions: a snapshot of
// entries saved under a key, one file per key in a directory of the user's
// (never in a synced tree), written atomically (a temp file, fsync, rename,
// fsync of the directory), bounded in size, pruned by age and by total
// size, and read back only when it is whole and saved under the same key.
//
// It knows nothing of containers, indexes or Kubernetes: pkg/filesync says
// what an ancestor holds and when it is confirmed, pkg/session builds the
// key from what makes two sessions the same sync. The model is git's index:
// beside each entry, the stat data (size, mtime, inode, ctime) that lets a
// later reader tell an unchanged file without reading it.
//
// What it never does: trust a file it cannot verify. A file that is cut
// short, fails its checksum, was written by another version, or holds
// another key is ignored with a note (Load's second result), exactly as if
// no state had been saved; it is overwritten by the next Save. Nor does it
// keep a state that sessions of other keys have written behind: see the
// claims (claim.go).
package syncstate

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of Store.
const (
	// DefaultMaxFile bounds one saved file (and what Load reads of one).
	DefaultMaxFile = 64 << 20
	// DefaultMaxTotal bounds the directory: the oldest files go first.
	DefaultMaxTotal = 256 << 20
	// DefaultMaxAge is how long a file nobody saved again is kept.
	DefaultMaxAge = 30 * 24 * time.Hour
)

// suffix names the files the store owns in its directory.
const suffix = ".state"

// Key identifies a sync: the parts that make two sessions the same one, in
// a fixed order (name=value pairs; pkg/session chooses them).
type Key []KeyPart

// KeyPart is one named part of a Key.
type KeyPart struct{ Name, Value string }

// String returns the key's canonical text, one "name=value" per line with
// values quoted, which is saved in the file and compared on Load.
func (k Key) String() string {
	var b strings.Builder
	for _, p := range k {
		fmt.Fprintf(&b, "%s=%q\n", p.Name, p.Value)
	}
	return b.String()
}

// ID returns the file name stem for k: a hash of its canonical text.
func (k Key) ID() string {
	s := sha256.Sum256([]byte(k.String()))
	return hex.EncodeToString(s[:16])
}

// Entry is one path of a saved snapshot: what it held when it was
// confirmed, with the local stat data that was current then.
type Entry struct {
	Path  string
	Type  uint8
	Mode  uint32
	Size  int64
	MTime int64 // nanoseconds since the epoch
	Link  string
	Sum   []byte // sha256 of a file's content, nil when unknown
	// Ino and CTime are the local file's inode and change time
	// (nanoseconds) when it was confirmed; 0 when the platform does not say.
	Ino   uint64
	CTime int64
	// Unknown: the container's state at Path was unknown when saved (an
	// upload it never acknowledged).
	Unknown bool
}

// Half is one container's part of a snapshot: the entries it confirmed,
// per mapping, stamped with the incarnation of the container that confirmed
// them, and the conflicts that stood there.
type Half struct {
	Stamp     string // the container's incarnation (see pkg/session)
	Name      string // which container, for notes ("ns/pod/container")
	Saved     time.Time
	Mappings  []Mapping
	Conflicts []Conflict
}

// Conflict is a conflict that stood at a path when the state was saved
// (pkg/syncback): the local file as it was when the conflict was reported,
// and what the container held. A start from the state keeps it standing
// until the next local save, and takes a container side other than this
// one for a change made after it.
type Conflict struct {
	Mapping int
	Path    string
	// The local file when the conflict was reported: whether it existed,
	// and its stat data (mtime and ctime in nanoseconds).
	Exists      bool
	Mode        uint32
	Size, MTime int64
	Ino         uint64
	CTime       int64
	Remote      ConflictSide
}

// ConflictSide is what the container held at a conflict's path: its
// sha256, nothing (Absent), or, from a container without sha256sum, its
// size and mtime in seconds (Stat); none of them for a directory's.
type ConflictSide struct {
	Sum         []byte
	Absent      bool
	Stat        bool
	Size, MTime int64
}

// Snapshot is what is saved under a key: a half per container.
type Snapshot struct {
	Key    string // Key.String() of the key it was saved under
	Saved  time.Time
	Halves []Half
}

// Half returns the half stamped stamp, if any. An empty stamp matches none.
func (s *Snapshot) Half(stamp string) (*Half, bool) {
	if s == nil || stamp == "" {
		return nil, false
	}
	for i := range s.Halves {
		if s.Halves[i].Stamp == stamp {
			return &s.Halves[i], true
		}
	}
	return nil, false
}

// Newest returns the most recently saved half, if any.
func (s *Snapshot) Newest() (*Half, bool) {
	if s == nil || len(s.Halves) == 0 {
		return nil, false
	}
	best := 0
	for i, h := range s.Halves {
		if h.Saved.After(s.Halves[best].Saved) {
			best = i
		}
	}
	return &s.Halves[best], true
}

// Store is a directory of saved snapshots. Zero bounds mean the defaults.
type Store struct {
	Dir               string
	MaxFile, MaxTotal int64
	MaxAge            time.Duration
	Now               func() time.Time // the clock pruning reads; nil: time.Now

	// write replaces a file whole; nil: writeAtomic. Tests make it fail.
	write func(dir, name string, write func(io.Writer) error) error
}

// DefaultDir returns where state lives: $XDG_STATE_HOME/kubectl-livesync
// when XDG_STATE_HOME is set, else kubectl-livesync/state in the OS cache
// directory (os.UserCacheDir).
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "kubectl-livesync"), nil
	}
	c, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a directory for sync state: %w", err)
	}
	return filepath.Join(c, "kubectl-livesync", "state"), nil
}

func (s *Store) maxFile() int64 {
	if s.MaxFile > 0 {
		return s.MaxFile
	}
	return DefaultMaxFile
}

func (s *Store) maxTotal() int64 {
	if s.MaxTotal > 0 {
		return s.MaxTotal
	}
	return DefaultMaxTotal
}

func (s *Store) maxAge() time.Duration {
	if s.MaxAge > 0 {
		return s.MaxAge
	}
	return DefaultMaxAge
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Path returns the file k is saved in.
func (s *Store) Path(k Key) string { return filepath.Join(s.Dir, k.ID()+suffix) }

// ErrTooLarge: a snapshot that would exceed MaxFile is not saved.
var ErrTooLarge = errors.New("sync state is larger than its bound")

// Load returns what is saved under k: nil and "" when nothing is; nil and a
// note (one line: what was wrong, and that it is ignored) when the file is
// damaged, too large, of another format or another key. It never fails:
// state that cannot be trusted is no state.
func (s *Store) Load(k Key) (*Snapshot, string) {
	name := s.Path(k)
	f, err := os.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ""
	}
	if err != nil {
		return nil, fmt.Sprintf("sync state %s cannot be read (%v): ignored, starting without it", name, err)
	}
	defer f.Close()
	snap, err := decode(f, s.maxFile())
	if err != nil {
		return nil, fmt.Sprintf("sync state %s is unusable (%v): ignored, starting without it", name, err)
	}
	if snap.Key != k.String() {
		return nil, fmt.Sprintf("sync state %s belongs to another sync: ignored, starting without it", name)
	}
	return snap, ""
}

// Save writes snap under k atomically (Key is set from k), then prunes the
// directory. A snapshot that is not written (larger than MaxFile, or the
// write failed) removes the old file: an old ancestor must not outlive
// newer confirmations. When that removal fails too, the error wraps
// ErrOldKept.
func (s *Store) Save(k Key, snap *Snapshot) error {
	snap.Key = k.String()
	if snap.Saved.IsZero() {
		snap.Saved = s.now()
	}
	name := s.Path(k)
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return s.dropOld(name, fmt.Errorf("saving sync state: %w", err))
	}
	write := s.write
	if write == nil {
		write = writeAtomic
	}
	// Streamed into the temp file: a snapshot that passes the bound is
	// given up as it passes it.
	if err := write(s.Dir, name, func(w io.Writer) error {
		_, err := encode(w, snap, s.maxFile())
		return err
	}); err != nil {
		if errors.Is(err, ErrTooLarge) {
			return s.dropOld(name, fmt.Errorf("saving sync state %s: %w (over %d bytes)", name, ErrTooLarge, s.maxFile()))
		}
		return s.dropOld(name, fmt.Errorf("saving sync state %s: %w", name, err))
	}
	s.Prune(name)
	return nil
}

// dropOld removes the file a failed save was to replace: what it holds is
// older than what both sides have confirmed since, and a start must not
// decide against it. err is why the save failed; ErrOldKept joins it when
// the old file stays.
func (s *Store) dropOld(name string, err error) error {
	rerr := os.Remove(name)
	if rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
		return err
	}
	// Without its claim the file is never trusted (see Acquire).
	cerr := os.Remove(strings.TrimSuffix(name, suffix) + claimSuffix)
	if cerr == nil || errors.Is(cerr, fs.ErrNotExist) {
		return err
	}
	return fmt.Errorf("%w; %w (%w)", err, ErrOldKept, rerr)
}

// Forget removes what is saved under k; nothing saved is no error.
func (s *Store) Forget(k Key) error {
	if err := os.Remove(s.Path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("forgetting sync state: %w", err)
	}
	return nil
}

// ForgetAll removes every file the store owns in its directory (states,
// claims, temp files), and returns how many it removed.
func (s *Store) ForgetAll() (int, error) {
	files, err := s.files()
	n := 0
	for _, f := range files {
		if rerr := os.Remove(f.name); rerr == nil {
			n++
		} else if !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return n, err
}

type stateFile struct {
	name string
	size int64
	mod  time.Time
}

// files lists the store's own files (temp files included) in its
// directory, newest first.
func (s *Store) files() ([]stateFile, error) {
	des, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []stateFile
	for _, de := range des {
		n := de.Name()
		if !de.Type().IsRegular() || !strings.HasSuffix(n, suffix) && !strings.HasSuffix(n, claimSuffix) && !strings.HasPrefix(n, tempPrefix) {
			continue
		}
		fi, err := de.Info()
		if err != nil {
			continue
		}
		out = append(out, stateFile{name: filepath.Join(s.Dir, n), size: fi.Size(), mod: fi.ModTime()})
	}
	slices.SortFunc(out, func(a, b stateFile) int { return b.mod.Compare(a.mod) })
	return out, nil
}

// Prune removes the store's files older than MaxAge, temp files left by a
// crash (older than a minute), and the oldest files beyond MaxTotal; keep
// (a state file's path) and its claim are never removed.
func (s *Store) Prune(keep string) {
	files, _ := s.files()
	now := s.now()
	keepClaim := strings.TrimSuffix(keep, suffix) + claimSuffix
	var total int64
	for _, f := range files {
		temp := strings.HasPrefix(filepath.Base(f.name), tempPrefix)
		switch {
		case f.name == keep, f.name == keepClaim:
			total += f.size
			continue
		case temp && now.Sub(f.mod) > time.Minute,
			!temp && now.Sub(f.mod) > s.maxAge(),
			!temp && total+f.size > s.maxTotal():
			_ = os.Remove(f.name)
			continue
		}
		total += f.size
	}
}

// tempPrefix names the temp files writeAtomic leaves if it dies.
const tempPrefix = ".tmp-"

// writeAtomic writes name through a temp file in dir: the file is either
// the old one or the whole new one, even across a crash.
func writeAtomic(dir, name string, write func(io.Writer) error) (err error) {
	f, err := os.CreateTemp(dir, tempPrefix+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<16)
	if err = write(bw); err != nil {
		return err
	}
	if err = bw.Flush(); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(tmp, name); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		_ = d.Sync() // the rename itself; not every file system can
		_ = d.Close()
	}
	return nil
}

// ErrOldKept: a save failed and the file it was to replace could not be
// removed either; a start may still read that older ancestor.
var ErrOldKept = errors.New("the older sync state could not be removed")
