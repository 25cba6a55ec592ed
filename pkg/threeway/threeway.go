// Package threeway is a start's three-way decision at one path: from what
// the saved ancestor, the local tree and the container hold there, and
// whether the path comes back (sync-back), what the initial sync does. It
// is the table in docs/state.md, pure and without I/O; pkg/filesync finds
// out what each side holds and carries the decisions out. It imports
// nothing of this module.
package threeway

// Action is what a start against a saved ancestor does at one path.
type Action int

// Actions, see Decide.
const (
	// Keep: nothing to send; the index records the local entry.
	Keep Action = iota
	// Send: a local change (edit, create, type change) goes up.
	Send
	// Delete: a local delete goes up (under the mass-delete guard).
	Delete
	// Back: a container change to a listed path, the local side
	// unchanged: nothing is sent, the index keeps the ancestor, and
	// sync-back brings the change home.
	Back
	// Both: both sides changed a listed path: nothing is sent, the
	// index keeps the ancestor, and sync-back records it (same content) or
	// reports a conflict (both kept).
	Both
	// Theirs: deleted locally, changed in the container, listed: the
	// container's is kept and comes home (a change wins over a delete);
	// the index forgets the path so sync-back sees it as new there.
	Theirs
	// Leave: the container created it and it is not local: left
	// there (upload never deletes what the ancestor never held).
	Leave
	// Forget: gone on both sides.
	Forget
)

var actionNames = [...]string{"keep", "send", "delete", "back", "both", "theirs", "leave", "forget"}

// String returns the action's name.
func (a Action) String() string { return actionNames[a] }

// Decide is the three-way rule of a start at one path, from whether
// each side still holds the ancestor (hasA: the ancestor holds the path;
// lSame, rSame: the local side, the container hold it as the ancestor
// does, or both lack it when it does not), which sides hold it now, and
// whether it comes back (listed). A local change wins wherever the path
// does not come back; where it does, no container change is overwritten.
func Decide(hasA, hasL, hasR, lSame, rSame, listed bool) Action {
	switch {
	case lSame && rSame:
		if !hasL && !hasR {
			return Forget
		}
		return Keep
	case lSame && !rSame:
		switch {
		case listed:
			return Back
		case hasL:
			return Send // the container's change to an unlisted path: the local side wins
		case hasR:
			return Leave
		}
		return Forget // deleted in the container, absent locally
	case !lSame && rSame:
		switch {
		case hasL:
			return Send
		case hasR:
			return Delete
		}
		return Forget
	}
	// Both changed.
	switch {
	case listed && hasL && hasR:
		return Both
	case listed && hasL:
		// Edited locally, deleted in the container: the modification wins over the
		// deletion (the mirror of Theirs), so the edit goes up. Both here
		// left it to sync-back, which keeps a path the container lacks: the edit never
		// reached the container and nothing was said.
		return Send
	case listed && hasR:
		return Theirs
	case hasL:
		return Send
	case hasR && hasA:
		return Delete
	case hasR:
		return Leave
	}
	return Forget
}
