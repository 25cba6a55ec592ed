package cmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/report"
	"github.com/livesync-dev/kubectl-livesync/pkg/session"
)

// entry is one entry of livesync.yaml made into a session: the file's values under the flags
// the command line gave.
type entry struct {
	name string
	// namespace is the entry's, or "" for the kubeconfig's (filled in after Validate).
	namespace string
	args      []string
	selector  string
	cfg       session.Config
	// onSync is the file's onSync command when the run uses it (no --on-sync), for the note.
	onSync string
}

// findProject decides whether this run is livesync.yaml's: --file, or no workload and a
// livesync.yaml here or above, or a single argument that names one of its entries.
func (o *SyncOptions) findProject() error {
	path := o.file
	if path == "" {
		if o.target.selector != "" || len(o.args) > 1 || len(o.args) == 1 && strings.Contains(o.args[0], ":") {
			return nil // a workload and mappings on the command line
		}
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if path, err = project.Find(wd); errors.Is(err, project.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
	} else if o.target.selector != "" || len(o.args) > 1 || len(o.args) == 1 && strings.Contains(o.args[0], ":") {
		return usageError{fmt.Errorf("--file runs the entries of %s: drop the workload, -l and mappings, or name one entry", o.file)}
	}
	f, err := project.Load(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	} else if err != nil {
		return usageError{err} // the file's content: bad input, exit 2
	}
	if len(o.args) == 1 {
		if _, err := f.Entry(o.args[0]); err != nil {
			if o.file != "" {
				return err
			}
			// Not an entry: a pod name whose mappings are missing, or a typo of an entry's
			// name (Validate says which is near).
			for _, s := range f.Syncs {
				o.near = append(o.near, s.Name)
			}
			return nil
		}
		o.only = o.args[0]
	}
	o.project = f
	return nil
}

// flagName words a flag as the user gave it: "--forward" on the command line, "forward: in
// livesync.yaml" for the field of the entry being checked.
func (o *SyncOptions) flagName(flag string) string {
	if o.fromFile[flag] {
		return flag + ": in " + project.FileName
	}
	return "--" + flag
}

// validateEntries makes each entry (or the one named) a session config and checks it as the
// command line's would be: any bad entry stops the run before anything talks to the cluster.
func (o *SyncOptions) validateEntries() error {
	if o.flags.Changed("forward") && o.only == "" && len(o.project.Syncs) > 1 {
		return fmt.Errorf("--forward would listen once for each of the %d entries of %s: name the entry to forward to (kubectl livesync ENTRY --forward ...), or put forward: in it", len(o.project.Syncs), o.project.Path())
	}
	for _, s := range o.project.Syncs {
		if o.only != "" && s.Name != o.only {
			continue
		}
		e, err := o.entryConfig(&s)
		if err != nil {
			return fmt.Errorf("%s: entry %q: %w", o.project.Path(), s.Name, err)
		}
		o.entries = append(o.entries, e)
	}
	return nil
}

func (o *SyncOptions) entryConfig(s *project.Sync) (entry, error) {
	c, initial := o.cfg, o.initial
	c.Containers = o.target.containers
	o.fromFile = map[string]bool{}
	defer func() { o.fromFile = nil }()
	for _, f := range entryFields {
		if !o.flags.Changed(f.flag) {
			f.fromFile(s, &c, &initial)
			o.fromFile[f.flag] = true
		}
	}
	ms, err := s.ParseMappings(o.project.Dir())
	if err != nil {
		return entry{}, err
	}
	if err := o.check(&c, ms, initial); err != nil {
		return entry{}, err
	}
	if !o.trustFile {
		if err := untrusted(s, o.project.Dir(), c.Sync.Mappings, o.flags.Changed); err != nil {
			return entry{}, err
		}
	}
	c.Name = s.Name // wait --entry finds the session by it
	e := entry{name: s.Name, namespace: s.Namespace, selector: s.Selector, cfg: c}
	if !o.flags.Changed("on-sync") {
		e.onSync = s.OnSync
	}
	if s.Workload != "" {
		e.args = []string{s.Workload}
	}
	if ns := o.g.configFlags.Namespace; ns != nil && *ns != "" {
		e.namespace = "" // -n overrides every entry's namespace
	}
	return e, nil
}

// runEntries runs every entry's session at once under one Ctrl-C. An entry that fails is
// reported with its name and the others keep running; a run that ends by itself (--once, or
// every entry failed) fails if any entry did.
func (o *SyncOptions) runEntries(ctx context.Context, restCfg *rest.Config, reporter *report.Printer) error {
	o.noteFileCommands(reporter)
	errs := make([]error, len(o.entries))
	var wg sync.WaitGroup
	for i, e := range o.entries {
		wg.Go(func() {
			rep := reporter.ForEntry(e.name)
			ns := e.namespace
			if ns == "" {
				ns = o.g.namespace
			}
			d := o.deps(restCfg, e.cfg, rep, rep.Notes(o.g.ErrOut), ns, e.args, e.selector)
			d.Releases = reporter.Releases(e.name, e.cfg)
			if errs[i] = session.Run(ctx, e.cfg, d); errs[i] != nil {
				rep.Failed(errs[i])
			}
		})
	}
	wg.Wait()
	reporter.Summary()
	if ctx.Err() != nil {
		return nil // Ctrl-C is how a session ends; failed entries were reported when they failed
	}
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, o.entries[i].name)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d entries of %s failed (%s): see their errors above", len(failed), len(o.entries), o.project.Path(), strings.Join(failed, ", "))
	}
	return nil
}

// noteFileCommands names, once per entry, the onSync command the file runs in the containers,
// the way make echoes a recipe: it needs no --trust-file (see untrusted), but it is the file's
// code running under the user's RBAC, and the user should see it.
func (o *SyncOptions) noteFileCommands(reporter *report.Printer) {
	for _, e := range o.entries {
		if e.onSync != "" && !e.cfg.Sync.DryRun {
			reporter.ForEntry(e.name).Note(fmt.Sprintf("onSync from %s runs sh -c %q in each container after each sync; --on-sync overrides it", o.project.Path(), e.onSync))
		}
	}
}

// duration is d as livesync.yaml writes it.
func duration(d time.Duration) *metav1.Duration {
	return &metav1.Duration{Duration: d}
}
