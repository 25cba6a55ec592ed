package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"k8s.io/cli-runtime/pkg/printers"
	"sigs.k8s.io/yaml"

	"github.com/livesync-dev/kubectl-livesync/pkg/image"
	"github.com/livesync-dev/kubectl-livesync/pkg/workload"
)

// Formats accepted by -o.
const (
	FormatTable = "table"
	FormatJSON  = "json"
	FormatYAML  = "yaml"
)

// ValidFormat checks an -o value.
func ValidFormat(f string) error {
	switch f {
	case FormatTable, FormatJSON, FormatYAML, "":
		return nil
	}
	return fmt.Errorf("invalid output format %q: use table, json or yaml", f)
}

// Print writes reports in the chosen format. JSON and YAML print one report as the documented
// object and several as {"items": [...]}, the way kubectl prints one object or a List.
func Print(out io.Writer, format string, reports []*Report) error {
	switch format {
	case FormatJSON, FormatYAML:
		var v any = map[string]any{"items": reports}
		if len(reports) == 1 {
			v = reports[0]
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if format == FormatYAML {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	for i, r := range reports {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := printTable(out, r); err != nil {
			return err
		}
	}
	return nil
}

// printTable prints one row per container (then image volume) and pod; container columns
// appear on a container's first row only, so the pods of one container read as a group.
func printTable(out io.Writer, r *Report) error {
	head := fmt.Sprintf("%s/%s in namespace %s", strings.ToLower(r.Workload.Kind), r.Workload.Name, r.Workload.Namespace)
	if len(r.PullSecrets) > 0 {
		head += fmt.Sprintf(" (pull secrets: %s)", strings.Join(r.PullSecrets, ", "))
	}
	fmt.Fprintln(out, head)
	if o := r.Owner; o != nil {
		fmt.Fprintln(out, describeOwner(o))
	}
	tw := printers.GetNewTabWriter(out)
	fmt.Fprintln(tw, "CONTAINER\tIMAGE\tPULL POLICY\tREGISTRY DIGEST\tVERDICT\tPOD\tRUNNING DIGEST\tREADY\tRESTARTS\tNODE\tPULL")
	var notes []string
	for _, c := range r.All() {
		name := c.Name
		switch {
		case c.Spec.Volume:
			name += " (volume)"
		case c.Init:
			name += " (init)"
		}
		label := c.Name
		if c.Spec.Volume {
			label = "volume " + c.Name
		}
		policy := c.EffectivePullPolicy
		if c.PullPolicy == "" && policy != "" {
			policy += " (default)"
		}
		reg := Short(c.RegistryDigest)
		if c.RegistryError != "" {
			reg = "error"
			notes = append(notes, fmt.Sprintf("%s: %s", label, c.RegistryError))
		}
		row := []string{name, c.Image, dash(policy), dash(reg), string(c.Verdict)}
		if len(c.Pods) == 0 {
			fmt.Fprintln(tw, strings.Join(append(row, "<none>", "-", "-", "-", "-", "-"), "\t"))
		}
		for i, p := range c.Pods {
			if i > 0 {
				row = []string{"", "", "", "", ""}
			}
			running := dash(Short(p.Digest))
			switch p.Match {
			case image.MatchConfig, image.MatchOlder:
				running += " (" + p.Match + ")"
			case image.MatchNone:
				running += " (unknown)"
			}
			restarts := strconv.Itoa(int(p.Restarts))
			if c.Spec.Volume {
				restarts = "-"
			}
			fmt.Fprintln(tw, strings.Join(append(row, p.Name, running, strconv.FormatBool(p.Ready), restarts, dash(p.Node), dash(p.Pull)), "\t"))
		}
		for _, n := range c.Notes {
			notes = append(notes, fmt.Sprintf("%s: %s", label, n))
		}
		if m := describeManagers(c.Managers); m != "" {
			notes = append(notes, fmt.Sprintf("%s: %s", label, m))
		}
		for _, rv := range c.Reverted {
			by := rv.Manager
			if by == "" {
				by = "another writer"
			}
			notes = append(notes, fmt.Sprintf("%s: livesync's pin reverted: %s %s was put back by %s (livesync set %s); restore drops the record", label, rv.Field, dash(c.fieldValue(rv.Field)), by, rv.Set))
		}
		if c.Original != nil {
			notes = append(notes, fmt.Sprintf("%s: changed by livesync, original image %s (%s); undo with restore", label, c.Original.Image, dash(c.Original.PullPolicy)))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintf(out, "  * %s\n", n)
	}
	return nil
}

// fieldValue is the container's current value of a field livesync writes.
func (c Container) fieldValue(field string) string {
	if field == workload.FieldPullPolicy {
		return c.PullPolicy
	}
	return c.Image
}

// describeOwner reads "owned by Flux (…) (label …): re-applies this field: …; hold it with: …".
// The marks shown are the object's labels and annotations; the managers have a note per
// container.
func describeOwner(o *workload.Owner) string {
	var marks []string
	for _, m := range o.Marks {
		if !strings.HasPrefix(m, "manager ") {
			marks = append(marks, m)
		}
	}
	s := "owned by " + o.Describe()
	if len(marks) > 0 {
		s += " (" + strings.Join(marks, ", ") + ")"
	}
	s += ": " + o.Effect
	if o.Hold != "" {
		s += fmt.Sprintf("; hold it with %q (and %q after restore)", o.Hold, o.Resume)
	}
	return s
}

// describeManagers reads "image managed by helm (Apply); imagePullPolicy by helm (Apply),
// kubectl-livesync (Update)", or "" when no manager is known.
func describeManagers(m map[string][]workload.FieldOwner) string {
	var parts []string
	for i, f := range []string{workload.FieldImage, workload.FieldPullPolicy} {
		if len(m[f]) == 0 {
			continue
		}
		names := make([]string, len(m[f]))
		for j, o := range m[f] {
			names[j] = o.String()
		}
		by := " by "
		if i == 0 || len(parts) == 0 {
			by = " managed by "
		}
		parts = append(parts, f+by+strings.Join(names, ", "))
	}
	return strings.Join(parts, "; ")
}

// Short abbreviates a digest to 12 hex digits, as docker and crane print them.
func Short(digest string) string { return image.Short(digest) }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
