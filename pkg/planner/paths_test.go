package planner

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestParseMapping(t *testing.T) {
	tests := []struct {
		in      string
		want    Mapping
		win     LocalPath // Local on Windows, where filepath.Clean differs
		wantErr string
	}{
		{in: "./src:/app", want: Mapping{"src", "/app"}},
		{in: "/abs/src:/app/", want: Mapping{"/abs/src", "/app"}, win: `\abs\src`},
		{in: "src:/app/../srv//x", want: Mapping{"src", "/srv/x"}},
		{in: `C:\src:/app`, want: Mapping{`C:\src`, "/app"}},
		{in: `C:/src:/app`, want: Mapping{"C:/src", "/app"}, win: `C:\src`},
		{in: `.\src:/app`, want: Mapping{`.\src`, "/app"}, win: "src"},
		{in: "a:b:/app", want: Mapping{"a:b", "/app"}},
		{in: "src:app", wantErr: "absolute REMOTE"},
		{in: "src", wantErr: "want LOCAL:REMOTE"},
		{in: ":/app", wantErr: "LOCAL is empty"},
		{in: "src:/", wantErr: "refusing to sync into the container's root"},
		{in: "src:/app/..", wantErr: "refusing"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			want := tt.want
			if runtime.GOOS == "windows" && tt.win != "" {
				want.Local = tt.win
			}
			checkParseMapping(t, tt.in, want, tt.wantErr)
		})
	}
}

func checkParseMapping(t *testing.T, in string, want Mapping, wantErr string) {
	t.Helper()
	got, err := ParseMapping(in)
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("ParseMapping(%q) error = %v, want %q", in, err, wantErr)
		}
		return
	}
	if err != nil || got != want {
		t.Fatalf("ParseMapping(%q) = %+v, %v; want %+v", in, got, err, want)
	}
}

func TestValidateMappings(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	must(t, os.WriteFile(file, nil, 0o644))
	tests := []struct {
		name    string
		ms      []Mapping
		wantErr []string
	}{
		{name: "ok", ms: []Mapping{{LocalPath(dir), "/app"}, {LocalPath(file), "/etc/f"}}},
		{name: "missing", ms: []Mapping{{LocalPath(dir + "/nope"), "/app"}}, wantErr: []string{"nope"}},
		{name: "overlap", ms: []Mapping{{LocalPath(dir), "/app"}, {LocalPath(dir), "/app/src"}},
			wantErr: []string{`/app/src": remote paths overlap`}},
		{name: "same", ms: []Mapping{{LocalPath(dir), "/app"}, {LocalPath(file), "/app"}}, wantErr: []string{"overlap"}},
		{name: "siblings", ms: []Mapping{{LocalPath(dir), "/app"}, {LocalPath(dir), "/application"}}},
		{name: "two errors", ms: []Mapping{{LocalPath(dir + "/x"), "/a"}, {LocalPath(dir), "/a/b"}}, wantErr: []string{"x", "overlap"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateMappings(tt.ms)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if lines := strings.Count(err.Error(), "\n") + 1; lines != len(tt.wantErr) {
				t.Errorf("got %d error lines, want %d: %v", lines, len(tt.wantErr), err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
