package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// ErrPinGone means the registry no longer serves a digest a patch was about to pin.
var ErrPinGone = errors.New("the registry no longer serves this digest")

// CheckPins asks the registry, before anything is patched, whether it still serves every digest
// the changes write (refresh's new pins, restore's originals that were themselves pinned). A
// digest-pinned pod may need the registry to start: a new node has no cache, and since 1.35 the
// kubelet re-verifies pull credentials (KEP-2535) even for cached images. So a pin to a digest
// the registry deleted is a rollout that cannot finish; refuse it in one line, changing
// nothing. Images without a digest are not asked about.
func CheckPins(ctx context.Context, res Resolver, w *workload.Workload, changes []workload.Change) error {
	for _, ch := range changes {
		if ch.Image == "" {
			continue
		}
		ref, err := image.ParseReference(ch.Image)
		if err != nil || ref.Digest == "" {
			continue
		}
		ok, err := res.Serves(ctx, ref, ref.Digest)
		if err != nil {
			return fmt.Errorf("%s: %s: cannot check that %s still serves %s (%w); nothing changed: retry, or use --force to patch anyway",
				w.Ref(), ch.Container.Label(), ref.Name(), Short(ref.Digest), err)
		}
		if !ok {
			return fmt.Errorf("%s: %s: %s@%s: %w, so pods pinned to it may not start; nothing changed: push the image again, or use --force to patch anyway",
				w.Ref(), ch.Container.Label(), ref.Name(), ref.Digest, ErrPinGone)
		}
	}
	return nil
}
