package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// repoURLs are the prefixes under which this repository's own files are linked absolutely (the
// help's Docs: lines, the JSON Schema's $id); a link below them is checked as the local path.
var repoURLs = []string{
	"https://github.com/livesync-dev/kubectl-livesync/blob/main/",
	"https://github.com/livesync-dev/kubectl-livesync/tree/main/",
	"https://raw.githubusercontent.com/livesync-dev/kubectl-livesync/main/",
}

var (
	fenceRe   = regexp.MustCompile("^ {0,3}(```+|~~~+)")
	headingRe = regexp.MustCompile(`^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	codeRe    = regexp.MustCompile("`+[^`]*`+")
	// inline links and images: [text](dest) or [text](dest "title"); dest may be <...>.
	linkRe    = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]*)(?:\s+"[^"]*")?\s*\)`)
	refDefRe  = regexp.MustCompile(`^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)`)
	htmlIDRe  = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
	textLink  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	lineAnchr = regexp.MustCompile(`^L\d+(-L\d+)?$`)
)

type checker struct {
	root    string
	anchors map[string]map[string]bool // absolute path of a .md file -> its anchors
}

func newChecker(root string) *checker {
	return &checker{root: root, anchors: map[string]map[string]bool{}}
}

// link is one link of a page, with the line it is on.
type link struct {
	line int
	dest string
}

// scan returns the links and the anchors of a Markdown text. Fenced code blocks and inline code
// spans hold neither.
func scan(text string) ([]link, map[string]bool) {
	var links []link
	anchors := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		if m := fenceRe.FindStringSubmatch(line); m != nil {
			switch {
			case fence == "":
				fence = m[1]
			case m[1][0] == fence[0] && len(m[1]) >= len(fence) && strings.TrimSpace(line) == m[1]:
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		for _, m := range htmlIDRe.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if m := headingRe.FindStringSubmatch(line); m != nil {
			s := slug(m[2])
			if n := seen[s]; n > 0 {
				anchors[s+"-"+strconv.Itoa(n)] = true
			} else {
				anchors[s] = true
			}
			seen[s]++
		}
		plain := codeRe.ReplaceAllString(line, "``")
		if m := refDefRe.FindStringSubmatch(plain); m != nil {
			links = append(links, link{i + 1, strings.Trim(m[1], "<>")})
		}
		for _, m := range linkRe.FindAllStringSubmatch(plain, -1) {
			links = append(links, link{i + 1, strings.Trim(m[1], "<>")})
		}
	}
	return links, anchors
}

// slug is the anchor GitHub gives a heading: its text as rendered (code spans and links reduced
// to their text, emphasis dropped), lower-cased, with every character that is not a letter,
// digit, space, hyphen or underscore removed and each space turned into a hyphen.
func slug(heading string) string {
	t := textLink.ReplaceAllString(heading, "$1")
	t = strings.NewReplacer("`", "", "**", "", "__", "").Replace(t)
	var b strings.Builder
	for _, r := range strings.ToLower(t) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func (c *checker) anchorsOf(abs string) (map[string]bool, error) {
	if a, ok := c.anchors[abs]; ok {
		return a, nil
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	_, a := scan(string(b))
	c.anchors[abs] = a
	return a, nil
}

// checkFile returns one line per link of file that does not resolve.
func (c *checker) checkFile(file string) ([]string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(abs)
	if err != nil {
		return nil, err
	}
	links, anchors := scan(string(b))
	c.anchors[abs] = anchors
	var problems []string
	for _, l := range links {
		if why := c.check(abs, l.dest); why != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: link %q: %s", file, l.line, l.dest, why))
		}
	}
	return problems, nil
}

// check returns why dest, linked from the page at abs, does not resolve, or "".
func (c *checker) check(abs, dest string) string {
	var target string
	local := false
	for _, p := range repoURLs {
		if strings.HasPrefix(dest, p) {
			target, local = filepath.Join(c.root, strings.TrimPrefix(dest, p)), true
		}
	}
	if !local {
		if u, err := url.Parse(dest); err != nil {
			return "not a URL: " + err.Error()
		} else if u.Scheme != "" || strings.HasPrefix(dest, "//") {
			return "" // another site: not followed
		}
		target = dest
	}
	path, frag, _ := strings.Cut(target, "#")
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	file := abs
	if path != "" {
		if local {
			file = filepath.Clean(path)
		} else {
			file = filepath.Join(filepath.Dir(abs), filepath.FromSlash(path))
		}
		if rel, err := filepath.Rel(c.root, file); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return "leaves the repository"
		}
		if _, err := os.Stat(file); err != nil {
			return "no such file or directory"
		}
	}
	if frag == "" {
		return ""
	}
	if !strings.HasSuffix(file, ".md") {
		if lineAnchr.MatchString(frag) {
			return ""
		}
		return "a #fragment on a file that is not Markdown"
	}
	a, err := c.anchorsOf(file)
	if err != nil {
		return err.Error()
	}
	if f, err := url.PathUnescape(frag); err == nil {
		frag = f
	}
	if !a[frag] {
		return fmt.Sprintf("no heading or anchor #%s in %s", frag, filepath.Base(file))
	}
	return ""
}
