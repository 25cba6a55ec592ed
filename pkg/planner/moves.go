package planner

import (
	"github.com/livesync-dev/kubectl-livesync/pkg/localtree"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
)

// Move is a copy whose content the container already holds at Src, an
// entry the index confirmed with the same sha256: a file renamed after its
// upload started, git mv, a moved directory, a copy of a known file. The
// container moves it there (Src deleted by the same plan) or copies it,
// instead of receiving the bytes again (see apply.sh, step 2b).
type Move struct {
	Src string // rel
	Sum [32]byte
}

// moveMin is the smallest file moved in the container rather than sent:
// below it, sending costs about what the container's sha256sum of the
// source does.
const moveMin = 64 << 10

// FindMoves sets p.Moves: for each file p copies that is at least moveMin,
// an entry of idx with its size and sha256 that p does not copy over, where
// p does not delete the destination first. Only where the container has
// sha256sum (alg, from its listing), which checks each source before
// anything is moved. A local file is hashed only when idx holds one of its
// size, and is not moved when it changed while hashed.
func FindMoves(m *Resolved, idx *Index, p *Plan, alg string) {
	if m.File || alg != "sha256sum" {
		return
	}
	var big []int
	for i, c := range p.Copies {
		if c.Type == TypeFile && c.Size >= moveMin {
			big = append(big, i)
		}
	}
	if len(big) == 0 {
		return
	}
	copied := make(map[string]bool, len(p.Copies))
	for _, c := range p.Copies {
		copied[c.Rel] = true
	}
	deleted := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	bySize := map[int64][]string{}
	for rel, e := range idx.all() {
		if e.Type == TypeFile && e.Size >= moveMin && e.Sum != nil && !e.stale && !copied[rel] {
			bySize[e.Size] = append(bySize[e.Size], rel)
		}
	}
	used := map[string]bool{} // sources moved away: one destination each
	for _, i := range big {
		c := p.Copies[i]
		srcs := bySize[c.Size]
		if len(srcs) == 0 || localtree.UnderAny(c.Rel, deleted) {
			continue
		}
		sum, err := hashFile(c.Src)
		if err != nil || !SameFile(m, c) {
			continue
		}
		for _, s := range srcs {
			if e, _ := idx.Get(s); *e.Sum != *sum || used[s] {
				continue
			}
			if p.Moves == nil {
				p.Moves = map[string]Move{}
			}
			p.Moves[c.Rel] = Move{Src: s, Sum: *sum}
			if localtree.UnderAny(s, deleted) {
				used[s] = true
			}
			break
		}
	}
}

// SameFile reports whether c's local file is still what c planned (size,
// mtime, mode): what was hashed is what is recorded.
func SameFile(m *Resolved, c Copy) bool {
	fi, err := m.FS().Lstat(c.Src)
	if err != nil {
		return false
	}
	e, ok := EntryOf(fi)
	return ok && e.Type == c.Type && e.Size == c.Size && e.MTime.Equal(c.MTime) && e.Mode == c.Mode
}

// MoveArgs splits p's copies into those the container moves or copies
// itself, as apply.sh's arguments, and those the archive carries; a move's
// source goes away only where p deletes it.
func MoveArgs(m *Resolved, p *Plan) (moves [][2]string, sent []Copy) {
	if len(p.Moves) == 0 {
		return nil, p.Copies
	}
	deleted := make(map[string]bool, len(p.Deletes))
	for _, d := range p.Deletes {
		deleted[d] = true
	}
	for _, c := range p.Copies {
		mv, ok := p.Moves[c.Rel]
		if !ok {
			sent = append(sent, c)
			continue
		}
		keep := !localtree.UnderAny(mv.Src, deleted)
		moves = append(moves, remote.MoveArgs("./"+m.RemoteName(mv.Src), "./"+c.Name, mv.Sum, keep, c.Mode))
	}
	return moves, sent
}
