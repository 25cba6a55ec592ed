package cmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggest returns the candidates within a typo of name (edit distance at most 2, or a third of
// its length for long names; a case-insensitive prefix also counts), nearest first, at most three.
func suggest(name string, candidates []string) []string {
	limit := max(2, len(name)/3)
	type near struct {
		s string
		d int
	}
	var found []near
	lname := strings.ToLower(name)
	for _, c := range candidates {
		if c == name || c == "" {
			continue
		}
		d := editDistance(lname, strings.ToLower(c))
		if d <= limit || len(name) >= 3 && strings.HasPrefix(strings.ToLower(c), lname) {
			found = append(found, near{c, d})
		}
	}
	slices.SortStableFunc(found, func(a, b near) int { return a.d - b.d })
	var out []string
	for _, f := range found {
		if !slices.Contains(out, f.s) {
			out = append(out, f.s)
		}
		if len(out) == 3 {
			break
		}
	}
	return out
}

// didYouMean is ": did you mean X?" (or "X or Y"), or "" when nothing is near.
func didYouMean(name string, candidates []string) string {
	s := suggest(name, candidates)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + strings.Join(s, " or ") + "?"
}

// editDistance is the Levenshtein distance of a and b, by bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// flagTypoError is cobra's flag error with the nearest flags of the command named:
// "unknown flag: --oncee; did you mean --once?".
func flagTypoError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	case strings.HasPrefix(msg, "unknown shorthand flag: "):
		return fmt.Errorf("%s: see %s --help", msg, cmd.CommandPath())
	default:
		return err
	}
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	s := suggest(name, names)
	if len(s) == 0 {
		return fmt.Errorf("%s: see %s --help", msg, cmd.CommandPath())
	}
	for i := range s {
		s[i] = "--" + s[i]
	}
	return fmt.Errorf("%s; did you mean %s?", msg, strings.Join(s, " or "))
}
