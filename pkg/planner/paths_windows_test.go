package planner

import "testing"

// TestParseMappingWindows: the ways Windows spells a local path (a drive, a
// UNC share, drive-relative, forward slashes, mixed) split at the REMOTE's
// colon and come out cleaned; a bare drive is refused: C: alone is that
// drive's current directory, whatever it is.
func TestParseMappingWindows(t *testing.T) {
	tests := []struct {
		in      string
		want    Mapping
		wantErr string
	}{
		{in: `C:\src:/app`, want: Mapping{`C:\src`, "/app"}},
		{in: `c:\Users\me\proj\:/app`, want: Mapping{`c:\Users\me\proj`, "/app"}},
		{in: `C:\:/app`, want: Mapping{`C:\`, "/app"}},
		{in: `C:/src/web/:/srv/www`, want: Mapping{`C:\src\web`, "/srv/www"}},
		{in: `C:/src\mixed/sub:/app`, want: Mapping{`C:\src\mixed\sub`, "/app"}},
		{in: `\\server\share\src:/app`, want: Mapping{`\\server\share\src`, "/app"}},
		{in: `//server/share/src:/app`, want: Mapping{`\\server\share\src`, "/app"}},
		{in: `\\server\share:/app`, want: Mapping{`\\server\share`, "/app"}},
		{in: `C:src:/app`, want: Mapping{`C:src`, "/app"}},
		{in: `C:.:/app`, want: Mapping{`C:.`, "/app"}},
		{in: `..\sibling:/app`, want: Mapping{`..\sibling`, "/app"}},
		{in: `\src:/app`, want: Mapping{`\src`, "/app"}},
		{in: `C:\src:/app\sub`, want: Mapping{`C:\src`, `/app\sub`}}, // REMOTE is POSIX: a backslash is a name's
		{in: `C:/src`, want: Mapping{`C`, "/src"}},                   // REMOTE forgotten: .\C, which ValidateMappings refuses unless it exists
		{in: `C::/src`, wantErr: `LOCAL "C:" is only a drive`},
		{in: `D::/app`, wantErr: `LOCAL "D:" is only a drive`},
		{in: `C:\src`, wantErr: "want LOCAL:REMOTE"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) { checkParseMapping(t, tt.in, tt.want, tt.wantErr) })
	}
}
