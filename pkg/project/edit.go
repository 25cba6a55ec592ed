package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"unicode/utf8"

	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// header starts a new file: the comment lets YAML editors find the schema.
const header = "# yaml-language-server: $schema=" + SchemaID + "\n"

// Add returns the file at path with s appended to its syncs; a missing, empty or comment-only
// file gets the keys it lacks. An entry of the same name is an error unless replace, in which
// case it is swapped in place.
//
// The file is edited as text, not re-encoded: the entry's lines are spliced in where the
// parsed nodes say the list ends (or where the replaced entry stood), and every other line
// stays byte for byte what the team committed (blank lines, comments, indentation, quoting,
// line ends), so the diff is the entry. The result is decoded again, strictly, and must hold
// the old entries unchanged and the new one, or Add fails.
func Add(path string, s Sync, replace bool) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	entry, err := entryLines(s)
	if err != nil {
		return nil, err
	}
	var want []Sync
	var out []byte
	if isEmpty(data) {
		out = addToEmpty(data, entry)
		want = []Sync{normalized(s)}
	} else {
		before, err := parse(data, true)
		if err != nil {
			return nil, fmt.Errorf("%s:%w: fix it before adding to it", path, err)
		}
		at := -1
		for i := range before.Syncs {
			if before.Syncs[i].Name == s.Name {
				at = i
			}
		}
		if at >= 0 && !replace {
			return nil, fmt.Errorf("%s already has an entry %q: pass --name to add another, or --force to replace it", path, s.Name)
		}
		if out, err = splice(data, entry, at); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		want = append(want, before.Syncs...)
		if at >= 0 {
			want[at] = normalized(s)
		} else {
			want = append(want, normalized(s))
		}
	}
	after, err := Parse(out)
	if err != nil {
		return nil, fmt.Errorf("%s: the extended file would not load: %w", path, err)
	}
	if !reflect.DeepEqual(after.Syncs, want) {
		return nil, fmt.Errorf("%s: adding entry %q as text would change the file's other entries: add it by hand", path, s.Name)
	}
	return out, nil
}

// isEmpty says whether data holds no YAML document: nothing, blank lines or comments.
func isEmpty(data []byte) bool {
	var doc yamlv3.Node
	return yamlv3.Unmarshal(data, &doc) == nil && len(doc.Content) == 0
}

// addToEmpty writes the keys after what data holds (comments), and the schema comment first
// unless data has one.
func addToEmpty(data []byte, entry []string) []byte {
	eol := lineEnd(data)
	var out []byte
	if !bytes.Contains(data, []byte("yaml-language-server:")) {
		out = append(out, strings.ReplaceAll(header, "\n", eol)...)
	}
	out = append(out, data...)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		out = append(out, eol...)
	}
	keys := []string{"apiVersion: " + APIVersion, "kind: " + Kind, "syncs:"}
	for _, l := range append(keys, item(entry, 2, 4)...) {
		out = append(out, l+eol...)
	}
	return out
}

// splice adds entry to the syncs of the valid file data (replacing entry number at, unless
// at < 0), touching only the lines it must.
func splice(data []byte, entry []string, at int) ([]byte, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	if root.Style&yamlv3.FlowStyle != 0 {
		return nil, errors.New("the file is a flow mapping ({...}): write it as key: value lines to add to it")
	}
	t := newText(data)
	k := -1
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "syncs" {
			k = i
		}
	}
	if k < 0 { // no syncs key: add it after the last key's value, at the keys' indentation
		col := root.Content[0].Column - 1
		t.insert(t.contentEnd(len(t.lines), maxLine(root)), append([]string{spaces(col) + "syncs:"}, item(entry, col+2, col+4)...))
		return t.bytes(), nil
	}
	key, seq := root.Content[k], root.Content[k+1]
	col := key.Column - 1
	// next is the line (0-based) of the key after syncs, or the end of the file.
	next := len(t.lines)
	if k+2 < len(root.Content) {
		next = root.Content[k+2].Line - 1
	}
	switch {
	case seq.Kind == yamlv3.ScalarNode: // "syncs:", "syncs: ~", "syncs: null"
		line := key.Line - 1
		if seq.Value != "" {
			t.cut(line, seq.Column-1, utf8.RuneCountInString(seq.Value))
		}
		t.insert(line+1, item(entry, col+2, col+4))
	case seq.Style&yamlv3.FlowStyle != 0:
		line := seq.Line - 1
		n := emptyFlowLen(t.text(line), seq.Column-1)
		if len(seq.Content) > 0 || n < 0 {
			return nil, errors.New("syncs is a flow list ([...]): write it as a block list (lines starting with -) to add to it")
		}
		t.cut(line, seq.Column-1, n)
		t.insert(line+1, item(entry, col+2, col+4))
	default:
		dash := seq.Column - 1
		indent := dash + 2
		if first := seq.Content[0]; first.Line == seq.Line {
			indent = first.Column - 1 // "-   name: api" keeps its gap
		}
		lines := item(entry, dash, indent)
		if at < 0 {
			t.insert(t.contentEnd(next, maxLine(seq)), lines)
			break
		}
		start, end := t.itemStart(seq.Content[at]), t.contentEnd(next, maxLine(seq))
		if at+1 < len(seq.Content) {
			end = t.contentEnd(t.itemStart(seq.Content[at+1]), maxLine(seq.Content[at]))
		}
		t.replace(start, end, lines)
	}
	return t.bytes(), nil
}

// entryLines renders s as block YAML lines, fields in the order of the Go type.
func entryLines(s Sync) ([]string, error) {
	n, err := blockNode(s)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n"), nil
}

// item makes entry a list item: its dash at column dash, its keys at column indent.
func item(entry []string, dash, indent int) []string {
	out := make([]string, len(entry))
	for i, l := range entry {
		switch {
		case i == 0:
			out[i] = spaces(dash) + "-" + spaces(max(indent-dash-1, 1)) + l
		case l != "":
			out[i] = spaces(indent) + l
		}
	}
	return out
}

// normalized is s as decoding its YAML gives it back (an empty list is absent, for one).
func normalized(s Sync) Sync {
	var out Sync
	if b, err := json.Marshal(s); err == nil {
		_ = json.Unmarshal(b, &out)
	}
	return out
}

// maxLine is the last line (1-based) a node of the tree under n starts on.
func maxLine(n *yamlv3.Node) int {
	m := n.Line
	for _, c := range n.Content {
		m = max(m, maxLine(c))
	}
	return m
}

// emptyFlowLen returns the length in runes of the empty flow list ("[]", "[ ]") at rune
// column col of line, or -1.
func emptyFlowLen(line string, col int) int {
	rest := []rune(line)[col:]
	if len(rest) == 0 || rest[0] != '[' {
		return -1
	}
	for i := 1; i < len(rest); i++ {
		switch rest[i] {
		case ']':
			return i + 1
		case ' ', '\t':
		default:
			return -1
		}
	}
	return -1
}

func spaces(n int) string { return strings.Repeat(" ", n) }

// lineEnd is the line end data uses: CRLF if its first line has one, else LF.
func lineEnd(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// text is a file as lines, each with its line end (the last one may lack it).
type text struct {
	lines []string
	eol   string
}

func newText(data []byte) *text {
	t := &text{eol: lineEnd(data)}
	if len(data) > 0 {
		t.lines = strings.SplitAfter(string(data), "\n")
		if t.lines[len(t.lines)-1] == "" {
			t.lines = t.lines[:len(t.lines)-1]
		}
	}
	return t
}

// text returns line i without its line end.
func (t *text) text(i int) string { return strings.TrimRight(t.lines[i], "\r\n") }

func (t *text) bytes() []byte { return []byte(strings.Join(t.lines, "")) }

// insert puts lines before line i (0-based; len(t.lines) appends).
func (t *text) insert(i int, lines []string) { t.replace(i, i, lines) }

// replace puts lines in the place of lines [i, j).
func (t *text) replace(i, j int, lines []string) {
	if i == len(t.lines) && i > 0 && !strings.HasSuffix(t.lines[i-1], "\n") {
		t.lines[i-1] += t.eol
	}
	add := make([]string, len(lines))
	for k, l := range lines {
		add[k] = l + t.eol
	}
	t.lines = append(t.lines[:i], append(add, t.lines[j:]...)...)
}

// cut removes n runes at rune column col of line i, and the spaces then ending the line.
func (t *text) cut(i, col, n int) {
	r := []rune(t.text(i))
	s := string(r[:col]) + string(r[col+n:])
	if strings.TrimSpace(s[strings.Index(s, ":")+1:]) == "" {
		s = strings.TrimRight(s, " \t")
	}
	t.lines[i] = s + t.lines[i][len(t.text(i)):]
}

// contentEnd walks back from line end (0-based, exclusive) over blank and comment lines, not
// above line last (1-based, the last line known to hold content), and returns where it stopped:
// the line after the content, where an entry goes before the comments that follow it.
func (t *text) contentEnd(end, last int) int {
	for end > last && end > 0 {
		if l := strings.TrimSpace(t.lines[end-1]); l != "" && !strings.HasPrefix(l, "#") {
			break
		}
		end--
	}
	return end
}

// itemStart returns the line (0-based) of the dash that starts list item n: n's own line, or
// the nearest line above that starts with one ("-" alone, or "- # comment", then the keys).
func (t *text) itemStart(n *yamlv3.Node) int {
	i := n.Line - 1
	if before := []rune(t.text(i))[:n.Column-1]; strings.TrimSpace(string(before)) == "-" {
		return i
	}
	for j := i - 1; j >= 0; j-- {
		switch l := strings.TrimSpace(t.text(j)); {
		case strings.HasPrefix(l, "-"):
			return j
		case l != "" && !strings.HasPrefix(l, "#"):
			return i // not a dash: the check after the splice says what went wrong
		}
	}
	return i
}

// blockNode renders v through its JSON tags (so field names and omitempty match Load), in
// the order of the Go fields (JSON is YAML, and the node keeps its order), as block YAML.
func blockNode(v any) (*yamlv3.Node, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	var block func(n *yamlv3.Node)
	block = func(n *yamlv3.Node) {
		n.Style = 0
		if yaml11Bool(n) {
			n.Style = yamlv3.DoubleQuotedStyle // v3 would write yes plain, and v2 reads that as true
		}
		for _, c := range n.Content {
			block(c)
		}
	}
	block(doc.Content[0])
	return doc.Content[0], nil
}
