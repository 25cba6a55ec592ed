//go:build bench

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one row of the table and of the JSON file. Baseline fields are null when a figure
// has none; target and met are null when the issue sets no target for it.
type result struct {
	Name          string   `json:"name"`
	Value         float64  `json:"value"`
	Unit          string   `json:"unit"`
	Baseline      *string  `json:"baseline"`
	BaselineValue *float64 `json:"baselineValue"`
	Ratio         *float64 `json:"ratio"`
	Target        *string  `json:"target"`
	Met           *bool    `json:"met"`
}

type results []result

// add records a figure without a baseline.
func (rs *results) add(name string, value float64, unit string) *result {
	*rs = append(*rs, result{Name: name, Value: round(value), Unit: unit})
	return &(*rs)[len(*rs)-1]
}

// pair records a figure measured against a baseline in the same run.
func (rs *results) pair(name string, value float64, unit, baseline string, baseValue float64) *result {
	r := rs.add(name, value, unit)
	r.Baseline, r.BaselineValue = &baseline, ref(round(baseValue))
	if baseValue != 0 {
		r.Ratio = ref(math.Round(value/baseValue*1000) / 1000)
	}
	return r
}

// target sets the target and whether it was met.
func (r *result) target(text string, met bool) *result {
	r.Target, r.Met = &text, &met
	return r
}

func ref[T any](v T) *T { return &v }

func round(v float64) float64 {
	switch {
	case math.Abs(v) >= 100:
		return math.Round(v*10) / 10
	case math.Abs(v) >= 1:
		return math.Round(v*100) / 100
	}
	return math.Round(v*10000) / 10000
}

// num formats a value without exponents.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (rs results) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tVALUE\tBASELINE\tBASELINE VALUE\tRATIO\tTARGET\tMET")
	for _, r := range rs {
		base, bval, ratio, tgt, met := "-", "-", "-", "-", "-"
		if r.Baseline != nil {
			base = *r.Baseline
			bval = num(*r.BaselineValue) + " " + r.Unit
		}
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *r.Ratio)
		}
		if r.Target != nil {
			tgt = *r.Target
			met = map[bool]string{true: "yes", false: "NO"}[*r.Met]
		}
		fmt.Fprintf(tw, "%s\t%s %s\t%s\t%s\t%s\t%s\t%s\n", r.Name, num(r.Value), r.Unit, base, bval, ratio, tgt, met)
	}
	_ = tw.Flush()
}

// markdown prints the table as Markdown, ready for docs/performance.md.
func (rs results) markdown(w io.Writer) {
	fmt.Fprintln(w, "| measurement | value | baseline (same run) | ratio | target | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rs {
		base, ratio, tgt, met := "", "", "", ""
		if r.Baseline != nil {
			base = fmt.Sprintf("%s: %s %s", *r.Baseline, num(*r.BaselineValue), r.Unit)
		}
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *r.Ratio)
		}
		if r.Target != nil {
			tgt = *r.Target
			met = map[bool]string{true: "yes", false: "**no**"}[*r.Met]
		}
		cells := []string{r.Name, num(r.Value) + " " + r.Unit, base, ratio, tgt, met}
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
}

func (rs results) writeJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(rs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// percentile returns the p-th percentile (0–100) of ds by linear interpolation.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	x := p / 100 * float64(len(s)-1)
	i := int(x)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + time.Duration(float64(s[i+1]-s[i])*(x-float64(i)))
}

func median(ds []time.Duration) time.Duration { return percentile(ds, 50) }

func msec(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func secs(d time.Duration) float64 { return d.Seconds() }

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// fmtDurations lists durations in ms for the log.
func fmtDurations(ds []time.Duration) string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.0f", msec(d))
	}
	return b.String()
}
