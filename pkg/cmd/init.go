package cmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/livesync-dev/kubectl-livesync/pkg/filesync"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/project"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// InitOptions writes a working command line into livesync.yaml as an entry.
type InitOptions struct {
	sync   SyncOptions
	name   string
	force  bool
	dryRun bool
	cmd    *cobra.Command
}

func newCmdInit(g *globalOptions) *cobra.Command {
	o := &InitOptions{sync: SyncOptions{g: g}}
	cmd := &cobra.Command{
		Use:   "init (TYPE/NAME | TYPE NAME | POD | -l SELECTOR) LOCAL:REMOTE [LOCAL:REMOTE ...]",
		Short: "Write a sync command line into livesync.yaml, so `kubectl livesync` runs it with the file's other entries",
		Long: `Add the sync that the same arguments would run to livesync.yaml: the nearest one in this
directory or a parent, or a new one here (or --file). The file is edited in place: the entry's
lines are added (and a syncs: key if it has none), every other line is kept byte for byte, and
so are its permissions; a symlinked livesync.yaml is written through to its target.
Only the flags given are written; a relative LOCAL is written relative to the file's directory.
Nothing talks to the cluster.`,
		Example: `  # Start a livesync.yaml for two services, then run both
  kubectl livesync init deploy/api ./api:/app -n backend --on-sync 'kill -HUP 1'
  kubectl livesync init deploy/web ./web:/usr/share/nginx/html -n frontend
  kubectl livesync`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.sync.args, o.cmd = args, cmd
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	f := cmd.Flags()
	o.sync.addEntryFlags(f)
	f.StringVar(&o.sync.file, "file", "", "the file to write (default: the nearest livesync.yaml, else ./livesync.yaml)")
	f.StringVar(&o.name, "name", "", "the entry's name (default: the workload's NAME; required with -l)")
	f.BoolVar(&o.force, "force", false, "replace an entry of the same name")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the file as it would be written, and write nothing")
	return cmd
}

// Validate checks the command line as the sync command would, without the cluster.
func (o *InitOptions) Validate() error {
	var wargs, raw []string
	for _, a := range o.sync.args {
		if strings.Contains(a, ":") {
			raw = append(raw, a)
		} else {
			wargs = append(wargs, a)
		}
	}
	if len(raw) == 0 {
		return errors.New("no LOCAL:REMOTE mapping was given: e.g. kubectl livesync init deploy/my-app ./src:/app")
	}
	bargs, err := workload.BuilderArgs(wargs, o.sync.target.selector)
	switch {
	case err != nil:
		return err
	case len(wargs) > 0 && o.sync.target.selector != "":
		return errors.New("livesync.yaml takes TYPE/NAME or -l SELECTOR (pods), not both: drop one")
	case len(bargs) == 2:
		bargs = []string{bargs[0] + "/" + bargs[1]}
	}
	if o.name == "" && len(wargs) > 0 {
		o.name = bargs[0][strings.LastIndex(bargs[0], "/")+1:]
	}
	if o.name == "" {
		return errors.New("-l SELECTOR: name the entry with --name")
	}
	var ms []planner.Mapping
	for _, a := range raw {
		m, err := planner.ParseMapping(a)
		if err != nil {
			return err
		}
		ms = append(ms, m)
	}
	s := &o.sync
	s.cfg.Containers = s.target.containers
	s.output, s.cfg.Sync.Quiet, s.cfg.Sync.Cap, s.cfg.Sync.Parallelism, s.cfg.Sync.ExecTimeout = "text", 1, 1, 1, filesync.DefaultExecTimeout
	if err := s.check(&s.cfg, ms, s.initial); err != nil {
		return err
	}
	s.args = nil
	if len(wargs) > 0 {
		s.args = bargs
	}
	return nil
}

// Run adds the entry and writes the file (or prints it with --dry-run).
func (o *InitOptions) Run() error {
	path := o.sync.file
	if path == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if path, err = project.Find(wd); errors.Is(err, project.ErrNotFound) {
			path = filepath.Join(wd, project.FileName)
		} else if err != nil {
			return err
		}
	}
	path, err := filepath.Abs(path) // a relative --file: LOCAL paths are made relative to its directory
	if err != nil {
		return err
	}
	e, err := o.entry(filepath.Dir(path))
	if err != nil {
		return err
	}
	out, err := project.Add(path, e, o.force)
	if err != nil {
		return err
	}
	g := o.sync.g
	if o.dryRun {
		_, err := g.Out.Write(out)
		return err
	}
	if err := writeFileAtomic(path, out); err != nil {
		return err
	}
	writeln(g.Out, "wrote entry %q to %s; run every entry with kubectl livesync, or this one with kubectl livesync %s", e.Name, path, e.Name)
	if err := untrusted(&e, filepath.Dir(path), o.sync.cfg.Sync.Mappings, func(string) bool { return false }); err != nil {
		writeln(g.ErrOut, "note: running entry %q will take the command line's consent: %v", e.Name, err)
	}
	return nil
}

// entry is the command line as an entry of the file in dir: the flags given, and LOCAL
// paths relative to dir (so the file works from any checkout).
func (o *InitOptions) entry(dir string) (project.Sync, error) {
	s := &o.sync
	e := project.Sync{Name: o.name, Selector: s.target.selector}
	if len(s.args) > 0 {
		e.Workload = s.args[0]
	}
	if ns := s.g.configFlags.Namespace; ns != nil {
		e.Namespace = *ns
	}
	for _, m := range s.cfg.Sync.Mappings {
		rel, err := filepath.Rel(dir, string(m.Local))
		if err != nil {
			return e, fmt.Errorf("mapping %q: %w", m, err)
		}
		local := filepath.ToSlash(rel)
		if !strings.HasPrefix(local, "../") && local != ".." {
			local = "./" + local
		}
		e.Mappings = append(e.Mappings, local+":"+string(m.Remote))
	}
	for _, f := range entryFields {
		if o.cmd.Flags().Changed(f.flag) {
			f.toFile(&e, &s.cfg, s.initial)
		}
	}
	return e, nil
}

// writeFileAtomic replaces path with data in one rename, so an interrupted write never leaves
// half a file. A symlinked path is written through: the temporary file is made beside the
// link's target and renamed over it, so the link stays a link. An existing file keeps its
// permissions; a new one is 0644.
func writeFileAtomic(path string, data []byte) error {
	target, mode := path, os.FileMode(0o644)
	if real, err := filepath.EvalSymlinks(path); err == nil {
		target = real
	} else if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&os.ModeSymlink != 0 {
		return fmt.Errorf("writing %s: it is a symlink to a missing file: create the file it points to, or remove the link", path)
	}
	if fi, err := os.Stat(target); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp, err := os.CreateTemp(filepath.Dir(target), "."+filepath.Base(target)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(mode)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), target)
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
