package syncstate

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// A saved ancestor says what both sides agreed on last only while no one
// else writes where it describes. Sessions of other keys can: another
// --exclude, no --sync-back, a changed ignore file, a root inside or
// around this one, all in the same container. So each key has a claim
// beside its state: the places (containers) its sessions write and the
// roots they write under. A session enters a place before it sends
// anything there, and that removes the state (and claim) of every other key
// that claims the same place under an overlapping root: even a session that
// crashes right after leaves no stale ancestor behind. A running session
// whose claim was taken that way was written behind its back: it saves no
// more, and drops what the other saved too (see Lease.Yield).
//
// A state file without its claim (saved by an older version, or its claim
// lost) has an unknown history and is never trusted.

// claimSuffix names the claim beside a key's state file.
const claimSuffix = ".claim"

// claim is what a claim file holds.
type claim struct {
	Token  string   `json:"token"`  // the session that wrote it last
	Roots  []string `json:"roots"`  // slash paths its sessions write under
	Places []string `json:"places"` // where its state's halves and its sessions' writes are
}

// Lease is a session's claim on its key: the places it has entered and the
// token that tells its claim from another session's.
type Lease struct {
	s     *Store
	k     Key
	token string

	mu      sync.Mutex
	c       claim
	entered []string // the places this session entered; c.Places adds those of the state it started with
}

// ErrUnclaimed: a state file had no claim and could not be removed.
var ErrUnclaimed = errors.New("sync state without its claim could not be removed")

func (s *Store) claimPath(id string) string { return filepath.Join(s.Dir, id+claimSuffix) }

// Claimed reports whether the state saved under k, if any, has its claim:
// without one it is not to be trusted (Acquire removes it).
func (s *Store) Claimed(k Key) bool {
	if _, err := os.Lstat(s.Path(k)); err != nil {
		return true
	}
	_, err := s.readClaim(k.ID())
	return err == nil
}

// Acquire claims k for a session that writes under roots (slash paths) and
// returns its lease. A state saved under k without a claim is removed
// first; when that fails the lease comes with an error wrapping
// ErrUnclaimed, and the state must not be used. The places of k's previous
// claim are kept while its state is: its halves are still there.
func (s *Store) Acquire(k Key, roots []string) (*Lease, error) {
	tok := make([]byte, 16)
	_, _ = rand.Read(tok)
	l := &Lease{s: s, k: k, token: hex.EncodeToString(tok)}
	l.c = claim{Token: l.token, Roots: cleanRoots(roots)}
	var kept error
	if _, err := os.Lstat(s.Path(k)); err == nil {
		if old, err := s.readClaim(k.ID()); err == nil {
			l.c.Places = old.Places
		} else if err := os.Remove(s.Path(k)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			kept = fmt.Errorf("%w: %s (%w)", ErrUnclaimed, s.Path(k), err)
		}
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("claiming sync state: %w", err)
	}
	if err := l.write(); err != nil {
		return nil, err
	}
	return l, kept
}

// Enter records that the session is about to write into place, and removes
// the state of every other key that claims place under an overlapping root
// (see the top of this file). Call it before anything is sent there.
func (l *Lease) Enter(place string) error {
	l.mu.Lock()
	if !slices.Contains(l.entered, place) {
		l.entered = append(l.entered, place)
	}
	if !slices.Contains(l.c.Places, place) {
		l.c.Places = append(l.c.Places, place)
	}
	l.mu.Unlock()
	var err error
	if l.Held() {
		err = l.write()
	} // else: taken by another session; Yield drops what is left
	return errors.Join(err, l.invalidate([]string{place}))
}

// Held reports whether the key's claim is still this lease's: false when a
// session of an overlapping key entered a place of it since (or a session
// of the same key started). It renews the claim's age for Prune.
func (l *Lease) Held() bool {
	c, err := l.s.readClaim(l.k.ID())
	if err != nil || c.Token != l.token {
		return false
	}
	now := l.s.now()
	_ = os.Chtimes(l.s.claimPath(l.k.ID()), now, now)
	return true
}

// Saved tells the lease that a save under its key succeeded: the state
// holds only this session's halves now, so the claim names only the places
// this session entered (it does not grow with every pod ever synced).
func (l *Lease) Saved() error {
	l.mu.Lock()
	if len(l.c.Places) == len(l.entered) {
		l.mu.Unlock()
		return nil
	}
	l.c.Places = slices.Clone(l.entered)
	l.mu.Unlock()
	if !l.Held() {
		return nil
	}
	return l.write()
}

// Yield gives the key up after Held said it was taken: its state and claim
// are removed, and so is the state of every other key that claims a place
// this session entered, which it may have written behind that one's back.
func (l *Lease) Yield() error {
	err := l.s.remove(l.k.ID())
	l.mu.Lock()
	places := slices.Clone(l.entered)
	l.mu.Unlock()
	return errors.Join(err, l.invalidate(places))
}

// invalidate removes the state and claim of every other key that claims
// one of places under a root overlapping this lease's.
func (l *Lease) invalidate(places []string) error {
	des, err := os.ReadDir(l.s.Dir)
	if err != nil {
		return fmt.Errorf("reading sync state directory: %w", err)
	}
	var errs []error
	for _, de := range des {
		id, ok := strings.CutSuffix(de.Name(), claimSuffix)
		if !ok || id == l.k.ID() {
			continue
		}
		c, err := l.s.readClaim(id)
		if err != nil || !overlaps(c, places, l.c.Roots) {
			continue
		}
		errs = append(errs, l.s.remove(id))
	}
	return errors.Join(errs...)
}

// remove removes a key's state, then its claim.
func (s *Store) remove(id string) error {
	var errs []error
	for _, name := range []string{filepath.Join(s.Dir, id+suffix), s.claimPath(id)} {
		if err := os.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing sync state %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func overlaps(c claim, places, roots []string) bool {
	if !slices.ContainsFunc(places, func(p string) bool { return slices.Contains(c.Places, p) }) {
		return false
	}
	for _, a := range c.Roots {
		for _, b := range roots {
			if under(a, b) || under(b, a) {
				return true
			}
		}
	}
	return false
}

// under reports whether p is root or inside it.
func under(p, root string) bool {
	return p == root || root == "/" || strings.HasPrefix(p, root+"/")
}

func cleanRoots(roots []string) []string {
	out := make([]string, 0, len(roots))
	for _, r := range roots {
		out = append(out, path.Clean("/"+r))
	}
	return out
}

func (l *Lease) write() error {
	l.mu.Lock()
	b, err := json.Marshal(l.c)
	l.mu.Unlock()
	if err != nil {
		return fmt.Errorf("encoding sync state claim: %w", err)
	}
	name := l.s.claimPath(l.k.ID())
	if err := writeAtomic(l.s.Dir, name, func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return fmt.Errorf("writing sync state claim %s: %w", name, err)
	}
	return nil
}

// maxClaim bounds what is read of a claim file.
const maxClaim = 1 << 20

func (s *Store) readClaim(id string) (claim, error) {
	var c claim
	f, err := os.Open(s.claimPath(id))
	if err != nil {
		return c, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxClaim))
	if err != nil {
		return c, err
	}
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&c); err != nil {
		return c, fmt.Errorf("damaged sync state claim %s: %w", s.claimPath(id), err)
	}
	return c, nil
}
