package delta

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	return b
}

// assemble does what apply.sh does with a patch: old's blocks and lit's
// bytes in the order of ops.
func assemble(t *testing.T, old []byte, ops []string, lit []byte) []byte {
	t.Helper()
	var out []byte
	for _, o := range ops {
		switch o[0] {
		case 'B':
			s, n, _ := strings.Cut(o[1:], ":")
			start, _ := strconv.Atoi(s)
			count, _ := strconv.Atoi(n)
			out = append(out, old[start*Block:(start+count)*Block]...)
		case 'L':
			n, _ := strconv.Atoi(o[1:])
			out, lit = append(out, lit[:n]...), lit[n:]
		default:
			t.Fatalf("op %q", o)
		}
	}
	if len(lit) != 0 {
		t.Fatalf("%d literal bytes left over", len(lit))
	}
	return out
}

// The rolling match finds the old blocks wherever they moved: bytes changed
// in place, inserted or removed cost about a block each, not the rest.
func TestOf(t *testing.T) {
	old := randomBytes(1, 40*Block+123)
	splice := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	changed := bytes.Clone(old)
	copy(changed[5*Block+10:], "a new version string")
	copy(changed[30*Block:], "and the build id")
	tests := []struct {
		name   string
		new    []byte
		maxLit int
	}{
		{"unchanged", old, Block},
		{"bytes changed in place", changed, 3 * Block},
		{"bytes inserted", splice(old[:7*Block+99], []byte("one more line of code\n"), old[7*Block+99:]), 2 * Block},
		{"bytes removed", splice(old[:20*Block+5], old[20*Block+1005:]), 2 * Block},
		{"blocks moved", splice(old[10*Block:20*Block], old[:10*Block], old[20*Block:]), Block},
		{"all new", randomBytes(2, len(old)), len(old)},
		{"shorter than a block", []byte("tiny"), 4},
	}
	sig := SignatureOf(old)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ops, lit := Of(tt.new, sig)
			if got := assemble(t, old, ops, lit); !bytes.Equal(got, tt.new) {
				t.Fatalf("assembled %d bytes, not the new %d", len(got), len(tt.new))
			}
			if len(lit) > tt.maxLit {
				t.Errorf("%d literal bytes, want at most %d (%d ops)", len(lit), tt.maxLit, len(ops))
			}
		})
	}
}

// The cache keeps the last CacheSize signatures and drops the oldest.
func TestCacheKeepsTheLast(t *testing.T) {
	var c Cache
	sig := SignatureOf(randomBytes(3, Block))
	for i := range CacheSize + 1 {
		c.Put([32]byte{byte(i)}, sig)
	}
	if c.Get([32]byte{0}) != nil {
		t.Errorf("the oldest signature is still kept after %d more", CacheSize)
	}
	if c.Get([32]byte{1}) != sig || c.Get([32]byte{CacheSize}) != sig {
		t.Errorf("a signature of the last %d is gone", CacheSize)
	}
}
