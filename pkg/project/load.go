package project

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"
	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"

	"github.com/livesync-dev/kubectl-livesync/pkg/forward"
	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/planner"
	"github.com/livesync-dev/kubectl-livesync/pkg/restart"
)

// ErrNotFound is returned by Find when no directory up to the root holds a FileName.
var ErrNotFound = errors.New(FileName + " not found")

// Find returns the path of the FileName in dir or its nearest parent that has one.
func Find(dir string) (string, error) {
	start, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for dir = start; ; {
		p := filepath.Join(dir, FileName)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("looking for %s: %w", FileName, err)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%w in %s or a parent directory: pass a workload, or write one with kubectl livesync init", ErrNotFound, start)
		}
		dir = parent
	}
}

// Load reads, decodes and validates the file at path. Every error names the file and line.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	f, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	f.path = abs
	return f, nil
}

// Parse decodes and validates data. An error starts with the line number ("12: ...").
func Parse(data []byte) (*File, error) { return parse(data, false) }

// parse is Parse; empty allows a file with no entries yet (one Add is about to extend).
func parse(data []byte, empty bool) (*File, error) {
	var doc yamlv3.Node
	dec := yamlv3.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
		return nil, errors.New("1: the file is empty: see kubectl livesync init")
	} else if err != nil {
		return nil, fmt.Errorf("%s", strings.TrimPrefix(err.Error(), "yaml: line "))
	}
	var extra yamlv3.Node
	if dec.Decode(&extra) == nil {
		return nil, fmt.Errorf("%d: a second YAML document: %s holds one", extra.Line, FileName)
	}
	lines := map[string]int{}
	if err := check(doc.Content[0], reflect.TypeFor[File](), "", lines); err != nil {
		return nil, err
	}
	var f File
	if err := yaml.UnmarshalStrict(data, &f); err != nil {
		return nil, fmt.Errorf("1: %w", err) // check caught what it knows; this is a backstop
	}
	if err := f.validate(lines, empty); err != nil {
		return nil, err
	}
	return &f, nil
}

// Dir is the directory relative LOCAL paths are relative to.
func (f *File) Dir() string { return filepath.Dir(f.path) }

// Path is where the file was loaded from.
func (f *File) Path() string { return f.path }

// Entry returns the entry called name.
func (f *File) Entry(name string) (*Sync, error) {
	var names []string
	for i := range f.Syncs {
		if f.Syncs[i].Name == name {
			return &f.Syncs[i], nil
		}
		names = append(names, f.Syncs[i].Name)
	}
	return nil, fmt.Errorf("%s has no entry %q: it has %s", f.path, name, strings.Join(names, ", "))
}

// ParseMappings parses the entry's mappings, relative LOCAL paths resolved against dir.
func (s *Sync) ParseMappings(dir string) ([]planner.Mapping, error) {
	var out []planner.Mapping
	for _, raw := range s.Mappings {
		m, err := planner.ParseMapping(raw)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(string(m.Local)) {
			m.Local = planner.LocalPath(filepath.Join(dir, string(m.Local)))
		}
		out = append(out, m)
	}
	return out, nil
}

// check walks the YAML nodes beside the Go type, so an unknown field or a value of the wrong
// shape is reported with its line (sigs.k8s.io/yaml goes through JSON and loses lines). It
// records the line of every path it visits for the validation messages.
func check(n *yamlv3.Node, t reflect.Type, path string, lines map[string]int) error {
	lines[path] = n.Line
	at := func(format string, args ...any) error {
		where := path
		if where == "" {
			where = "the file"
		}
		return fmt.Errorf("%d: %s: %s", n.Line, where, fmt.Sprintf(format, args...))
	}
	if n.Kind == yamlv3.AliasNode {
		return at("YAML aliases are not supported here: write the value out")
	}
	if t.Kind() == reflect.Pointer {
		if t.Elem().Kind() == reflect.Struct && t.Elem().NumField() == 1 && t.Elem().Field(0).Type == reflect.TypeFor[time.Duration]() {
			if n.Kind != yamlv3.ScalarNode || n.Tag != "!!str" {
				return at("want a duration such as 30s, got %s", describe(n))
			}
			if _, err := time.ParseDuration(n.Value); err != nil {
				return at("want a duration such as 30s, got %q", n.Value)
			}
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return at("want a mapping (key: value lines), got %s", describe(n))
		}
		fields := map[string]reflect.Type{}
		var known []string
		for i := range t.NumField() {
			sf := t.Field(i)
			name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			fields[name] = sf.Type
			known = append(known, name)
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			ft, ok := fields[k.Value]
			switch {
			case !ok:
				return fmt.Errorf("%d: unknown field %q%s: the fields are %s", k.Line, k.Value, in(path), strings.Join(known, ", "))
			case seen[k.Value]:
				return fmt.Errorf("%d: field %q%s appears twice", k.Line, k.Value, in(path))
			}
			seen[k.Value] = true
			if err := check(v, ft, join(path, k.Value), lines); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind == yamlv3.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yamlv3.SequenceNode {
			return at("want a list (lines starting with -), got %s", describe(n))
		}
		for i, c := range n.Content {
			if err := check(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i), lines); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!str" || yaml11Bool(n) {
			return at("want a string, got %s (quote it)", describe(n))
		}
	case reflect.Bool:
		if n.Kind != yamlv3.ScalarNode || n.Tag != "!!bool" && !yaml11Bool(n) {
			return at("want true or false, got %s", describe(n))
		}
	default:
		return at("no YAML form for Go type %s", t) // a programming error in types.go
	}
	return nil
}

// yaml11Bool says whether n is a plain scalar that YAML 1.2 (goyaml.v3) reads as a string
// but YAML 1.1 (goyaml.v2, which sigs.k8s.io/yaml decodes with) reads as a bool: yes, off, ...
func yaml11Bool(n *yamlv3.Node) bool {
	if n.Style&(yamlv3.DoubleQuotedStyle|yamlv3.SingleQuotedStyle) != 0 || n.Tag != "!!str" {
		return false
	}
	switch n.Value {
	case "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF":
		return true
	}
	return false
}

func join(path, field string) string {
	if path == "" {
		return field
	}
	return path + "." + field
}

func in(path string) string {
	if path == "" {
		return ""
	}
	return " in " + path
}

func describe(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.MappingNode:
		return "a mapping"
	case yamlv3.SequenceNode:
		return "a list"
	}
	if n.Tag == "!!null" {
		return "nothing"
	}
	return fmt.Sprintf("%q", n.Value)
}

func (f *File) validate(lines map[string]int, empty bool) error {
	at := func(path, format string, args ...any) error {
		line := lines[path]
		if line == 0 {
			line = 1 // a field that is missing: the file's start
		}
		return fmt.Errorf("%d: %s: %s", line, path, fmt.Sprintf(format, args...))
	}
	switch {
	case f.APIVersion == "" && lines["apiVersion"] == 0:
		return at("apiVersion", "missing: the file starts with apiVersion: %s and kind: %s", APIVersion, Kind)
	case f.APIVersion != APIVersion:
		return at("apiVersion", "want %s, got %q", APIVersion, f.APIVersion)
	case f.Kind == "" && lines["kind"] == 0:
		return at("kind", "missing: want kind: %s", Kind)
	case f.Kind != Kind:
		return at("kind", "want %s, got %q", Kind, f.Kind)
	case len(f.Syncs) == 0 && !empty:
		return at("syncs", "no entries: add one with kubectl livesync init TYPE/NAME LOCAL:REMOTE")
	}
	for i, a := range f.AllowContexts {
		p := fmt.Sprintf("allowContexts[%d]", i)
		switch u, err := url.Parse(a.Server); {
		case a.Context == "":
			return at(p, "no context: name the kubeconfig context")
		case a.Server == "":
			return at(p, "no server: name the API server %q must point at, as its kubeconfig cluster has it (kubectl config view --minify -o jsonpath='{.clusters[0].cluster.server}' --context %s)", a.Context, a.Context)
		case err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
			return at(p+".server", "%q is no API server URL: want https://HOST[:PORT]", a.Server)
		}
	}
	var names []string
	for i, s := range f.Syncs {
		p := fmt.Sprintf("syncs[%d]", i)
		if errs := validation.IsDNS1123Label(s.Name); len(errs) > 0 {
			return at(p+".name", "%q is not a name: %s", s.Name, errs[0])
		}
		if slices.Contains(names, s.Name) {
			return at(p+".name", "%q is the name of an earlier entry too: names must be unique", s.Name)
		}
		names = append(names, s.Name)
		switch {
		case (s.Workload == "") == (s.Selector == ""):
			return at(p, "set exactly one of workload (e.g. deploy/api) and selector (e.g. app=api)")
		case len(s.Mappings) == 0:
			return at(p, "no mappings: add LOCAL:REMOTE pairs, e.g. mappings: [./src:/app]")
		case s.Workload != "" && !strings.Contains(s.Workload, "/"):
			return at(p+".workload", "want TYPE/NAME, e.g. deploy/%s", s.Workload)
		}
		for j, raw := range s.Mappings {
			if _, err := planner.ParseMapping(raw); err != nil {
				return at(fmt.Sprintf("%s.mappings[%d]", p, j), "%v", err)
			}
		}
		if s.Initial != "" {
			if _, err := planner.ParseInitialMode(s.Initial); err != nil {
				return at(p+".initial", "%v", err)
			}
		}
		if s.PullPolicy != "" {
			if err := image.ValidPullPolicy(s.PullPolicy); err != nil {
				return at(p+".pullPolicy", "%v", err)
			}
		}
		if _, err := restart.Parse(s.Restart); err != nil {
			return at(p+".restart", "%v", strings.Replace(err.Error(), "invalid --restart ", "", 1))
		}
		switch s.Helper {
		case "", "auto", "ephemeral", "never":
		default:
			return at(p+".helper", "%q: use auto, ephemeral or never", s.Helper)
		}
		if s.Interval != nil && s.Interval.Duration < time.Second {
			return at(p+".interval", "%s is too short: use 1s or more", s.Interval.Duration)
		}
		if s.OnSyncTimeout != nil && s.OnSyncTimeout.Duration <= 0 {
			return at(p+".onSyncTimeout", "%s: use a positive duration", s.OnSyncTimeout.Duration)
		}
		for j, raw := range s.Forward {
			if _, err := forward.Parse(raw); err != nil {
				return at(fmt.Sprintf("%s.forward[%d]", p, j), "%v", err)
			}
		}
		for _, c := range s.Containers {
			if c == "" {
				return at(p+".containers", `"" is not a container name`)
			}
		}
	}
	return nil
}
