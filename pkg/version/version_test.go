package version

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	base := Info{Version: unstamped, Commit: "unknown", Date: "unknown"}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Info
	}{
		{"go install module@tag", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}},
			Info{Version: "v0.3.1", Commit: "unknown", Date: "unknown"}},
		{"a build in a checkout with changes", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "52e9758abcdef0123456789"}, {Key: "vcs.time", Value: "2026-12-05T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}},
			Info{Version: unstamped, Commit: "52e9758abcde+dirty", Date: "2026-12-05T18:00:00Z"}},
		{"nothing recorded", nil, base},
	} {
		if got := fromBuildInfo(base, tc.bi, tc.bi != nil); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
