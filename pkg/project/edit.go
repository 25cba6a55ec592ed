package project

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	yamlv3 "sigs.k8s.io/yaml/goyaml.v3"
)

// header starts a new file: the comment lets YAML editors find the schema.
const header = "# yaml-language-server: $schema=" + SchemaID + "\n"

// Add returns the file at path with s appended to its syncs, keeping its comments and
// layout; a missing file becomes a new one. An entry of the same name is an error unless
// replace, in which case it is swapped in place. The result is validated as Load would.
func Add(path string, s Sync, replace bool) ([]byte, error) {
	entry, err := blockNode(s)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		data = []byte(header + "apiVersion: " + APIVersion + "\nkind: " + Kind + "\nsyncs: []\n")
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", path, err)
	default:
		if _, err := parse(data, true); err != nil {
			return nil, fmt.Errorf("%s:%w: fix it before adding to it", path, err)
		}
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	syncs := valueOf(doc.Content[0], "syncs")
	if syncs.Kind != yamlv3.SequenceNode || syncs.Style == yamlv3.FlowStyle { // "syncs:" or "syncs: []"
		*syncs = yamlv3.Node{Kind: yamlv3.SequenceNode, Tag: "!!seq", Content: syncs.Content}
	}
	replaced := false
	for i, e := range syncs.Content {
		if n := valueOf(e, "name"); n != nil && n.Value == s.Name {
			if !replace {
				return nil, fmt.Errorf("%s already has an entry %q: pass --name to add another, or --force to replace it", path, s.Name)
			}
			syncs.Content[i], replaced = entry, true
		}
	}
	if !replaced {
		syncs.Content = append(syncs.Content, entry)
	}
	var buf bytes.Buffer
	enc := yamlv3.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if _, err := Parse(buf.Bytes()); err != nil {
		return nil, fmt.Errorf("%s: the extended file would not load: %w", path, err)
	}
	return buf.Bytes(), nil
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

// valueOf returns the value node of key in mapping m, or nil.
func valueOf(m *yamlv3.Node, key string) *yamlv3.Node {
	if m.Kind != yamlv3.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
