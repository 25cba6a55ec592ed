package project

import (
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// SchemaID is where the published schema lives; editors resolve it from the
// yaml-language-server comment that init writes.
const SchemaID = "https://raw.githubusercontent.com/livesync-dev/kubectl-livesync/main/docs/livesync.schema.json"

// Schema returns the JSON Schema (draft-07, the draft editors support best) of File,
// generated from the Go types and their doc tags, so it cannot drift from what Load accepts.
func Schema() []byte {
	s := schemaOf(reflect.TypeFor[File]())
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	s["$id"] = SchemaID
	s["title"] = "kubectl livesync " + FileName
	props := s["properties"].(map[string]any)
	props["apiVersion"].(map[string]any)["const"] = APIVersion
	props["kind"].(map[string]any)["const"] = Kind
	props["syncs"].(map[string]any)["minItems"] = 1
	item := props["syncs"].(map[string]any)["items"].(map[string]any)
	item["oneOf"] = []any{
		map[string]any{"required": []string{"workload"}},
		map[string]any{"required": []string{"selector"}},
	}
	item["properties"].(map[string]any)["mappings"].(map[string]any)["minItems"] = 1
	item["properties"].(map[string]any)["name"].(map[string]any)["pattern"] = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
	item["properties"].(map[string]any)["restart"].(map[string]any)["pattern"] = "^(none|process|signal:([Ss][Ii][Gg])?[A-Za-z0-9]+)$"
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic(err) // maps of strings, slices and bools always marshal
	}
	return append(out, '\n')
}

func schemaOf(t reflect.Type) map[string]any {
	if t.Kind() == reflect.Pointer {
		if t.Elem().Kind() == reflect.Struct && t.Elem().NumField() == 1 && t.Elem().Field(0).Type == reflect.TypeFor[time.Duration]() {
			return map[string]any{"type": "string", "pattern": `^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`}
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		props := map[string]any{}
		var required []string
		for i := range t.NumField() {
			f := t.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := schemaOf(f.Type)
			if d := f.Tag.Get("doc"); d != "" {
				p["description"] = d
			}
			if e := f.Tag.Get("enum"); e != "" {
				p["enum"] = strings.Split(e, ",")
			}
			props[name] = p
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
		}
		return map[string]any{"type": "object", "properties": props, "required": required, "additionalProperties": false}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	default:
		return map[string]any{"type": "string"}
	}
}
