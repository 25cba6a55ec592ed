package remote

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestScriptArgsSplit(t *testing.T) {
	all := &ApplyArgs{
		Checks: []string{"p./a", "w./a"}, Deletes: []string{"./d1", "./d2"}, Rmdirs: []string{"./r"},
		Tar: true, Gz: true, Chmods: []string{"555./a"},
	}
	tests := []struct {
		name string
		a    *ApplyArgs
		max  int
		want string
	}{
		{"nothing", &ApplyArgs{}, 10, "[{[] [] [] [] false false}]"},
		{"tar only", &ApplyArgs{Tar: true}, 10, "[{[] [] [] [] true false}]"},
		{"all in one", all, 100, "[{[p./a w./a] [./d1 ./d2] [./r] [555./a] true true}]"},
		// Steps keep their order across execs: the chmod after the tar,
		// which alone carries the compression.
		{"split", all, 10, "[{[p./a w./a] [] [] [] false false} {[] [./d1 ./d2] [] [] false false} " +
			"{[] [] [./r] [] true true} {[] [] [] [555./a] false false}]"},
		{"a longer path alone", &ApplyArgs{Deletes: []string{"./very-long", "./b"}}, 8, "[{[] [./very-long] [] [] false false} {[] [./b] [] [] false false}]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, a := range tt.a.Split(tt.max) {
				got = append(got, fmt.Sprintf("{%v %v %v %v %v %v}", a.Checks, a.Deletes, a.Rmdirs, a.Chmods, a.Tar, a.Gz))
			}
			if s := "[" + strings.Join(got, " ") + "]"; s != tt.want {
				t.Errorf("split = %s, want %s", s, tt.want)
			}
		})
	}
}

// Places go whole into the exec that carries the tar, which alone brings
// the files they put; takes go with the deletes, before the rmdirs.
func TestScriptArgsSplitPlaces(t *testing.T) {
	a := &ApplyArgs{
		Expect: []string{"a./n1", "a./n2"}, Deletes: []string{"./d1"}, Takes: []string{"Da./t1"},
		Rmdirs: []string{"./r"}, Places: []string{"Sa./n1", "Sa./n2"}, Tar: true, Chmods: []string{"555./a"},
	}
	var got []string
	for _, p := range a.Split(12) {
		got = append(got, fmt.Sprintf("{%v %v %v %v %v %v %v}", p.Expect, p.Deletes, p.Takes, p.Rmdirs, p.Places, p.Chmods, p.Tar))
	}
	want := "[{[a./n1 a./n2] [] [] [] [] [] false} {[] [./d1] [Da./t1] [] [] [] false} {[] [] [] [./r] [] [] false} " +
		"{[] [] [] [] [Sa./n1 Sa./n2] [] true} {[] [] [] [] [] [555./a] false}]"
	if s := "[" + strings.Join(got, " ") + "]"; s != want {
		t.Errorf("split = %s, want %s", s, want)
	}
	// In argv, the takes count with the rmdirs ($5) and the places with the
	// chmods ($6).
	argv := a.Argv()
	if n := argv[8:10]; n[0] != "2" || n[1] != "3" {
		t.Errorf("argv counts rmdirs %s, chmods %s; want 2 and 3", n[0], n[1])
	}
}

// The recoveries of a killed batch lead the first exec, before its
// preconditions, and count with the checks ($4).
func TestScriptArgsSplitUnswap(t *testing.T) {
	a := &ApplyArgs{Unswap: []string{"Ua./u1", "Ua./u2"}, Expect: []string{"a./n1"}, Deletes: []string{"./d1"}}
	var got []string
	for _, p := range a.Split(16) {
		got = append(got, fmt.Sprintf("{%v %v %v}", p.Unswap, p.Expect, p.Deletes))
	}
	if s, want := strings.Join(got, " "), "{[Ua./u1 Ua./u2] [] []} {[] [a./n1] [./d1]}"; s != want {
		t.Errorf("split = %s, want %s", s, want)
	}
	argv := a.Argv()
	if argv[7] != "3" || !slices.Equal(argv[10:13], []string{"Ua./u1", "Ua./u2", "a./n1"}) {
		t.Errorf("argv %q: want 3 checks, the recoveries first", argv[7:])
	}
}
