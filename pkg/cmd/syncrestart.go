package cmd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/remote"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// restartFlag is --restart, parsed into the session's restart mode.
type restartFlag struct{ m *restart.Mode }

func (f restartFlag) String() string {
	if f.m == nil {
		return "none"
	}
	return f.m.String()
}

func (f restartFlag) Set(s string) error {
	m, err := restart.Parse(s)
	if err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "invalid --restart "+strconv.Quote(s)+": "))
	}
	*f.m = m
	return nil
}

func (restartFlag) Type() string { return "MODE" }

// Supervise rolls w out with the containers' commands under livesync's supervisor
// (--restart process), after checking in a running pod that the image has /bin/sh to run it;
// under --dry-run the API server validates the patch and it is shown.
func (s *syncImages) Supervise(ctx context.Context, w *workload.Workload, containers []string) error {
	r := s.refresher
	plan, err := workload.PlanSupervise(ctx, w, containers, entrypointFunc(func(ctx context.Context, img string) ([]string, []string, error) {
		res, err := r.registry.resolverFor(ctx, r.g, w)
		if err != nil {
			return nil, nil, err
		}
		er, ok := res.(workload.EntrypointReader)
		if !ok {
			return nil, nil, fmt.Errorf("this registry client cannot read image configs")
		}
		return er.Entrypoint(ctx, img)
	}))
	if err != nil {
		return err
	}
	for _, name := range plan.Already {
		r.say("%s: container %q already runs livesync's supervisor", w.Ref(), name)
	}
	p, err := plan.Patch()
	if err != nil || p == nil {
		return err
	}
	for _, ch := range plan.Changes {
		if err := s.checkShell(ctx, w, ch.Container); err != nil {
			return err
		}
		r.say("%s: container %q: command -> livesync's supervisor running %s (undo: kubectl livesync restore %s)",
			w.Ref(), ch.Container.Name, shellWords(plan.Argv[ch.Container.Name]), w.Ref())
	}
	return r.mutate.apply(ctx, r.g, r.out(), p, nil)
}

type entrypointFunc func(ctx context.Context, img string) ([]string, []string, error)

func (f entrypointFunc) Entrypoint(ctx context.Context, img string) ([]string, []string, error) {
	return f(ctx, img)
}

// checkShell runs /bin/sh in the container c of one running pod of w, if there is one: the
// supervisor is a shell script, and an image without sh would crash every new pod.
func (s *syncImages) checkShell(ctx context.Context, w *workload.Workload, c workload.Container) error {
	pods, err := w.Pods(ctx, s.refresher.g.client)
	if err != nil {
		return err
	}
	for i := range pods {
		p := &pods[i]
		st := workload.ContainerStatus(p, c.Name, false)
		if p.DeletionTimestamp != nil || st == nil || st.State.Running == nil {
			continue
		}
		t := filesync.Target{Namespace: p.Namespace, Pod: p.Name, Container: c.Name, ContainerID: st.ContainerID}
		err := remote.CheckShell(ctx, s.pods, t)
		if errors.Is(err, remote.ErrNoShell) {
			return fmt.Errorf("--restart process: container %q of pod %s has no /bin/sh to run livesync's supervisor (image %s): use --restart signal:SIG if the app reloads on a signal, or add a shell to the image", c.Name, p.Name, c.Image)
		}
		if err != nil {
			return fmt.Errorf("--restart process: checking for /bin/sh in container %q of pod %s: %w", c.Name, p.Name, err)
		}
		return nil
	}
	return nil
}

// shellWords shows argv as a shell would read it back.
func shellWords(argv []string) string {
	plain := func(r rune) bool {
		return strings.ContainsRune("/-._=:,", r) || unicode.IsLetter(r) || unicode.IsDigit(r)
	}
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.IndexFunc(a, func(r rune) bool { return !plain(r) }) < 0 {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}
