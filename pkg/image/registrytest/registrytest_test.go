package registrytest

import (
	"net/http"
	"testing"
)

func TestNewBasicAuth(t *testing.T) {
	r := NewBasicAuth(t, "alice", "s3cret")
	if d := r.PushRandom(t, "app:dev"); len(d) != len("sha256:")+64 {
		t.Fatalf("digest = %q", d)
	}
	before := r.Refused()
	resp, err := http.Head("http://" + r.Host + "/v2/app/manifests/dev")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || r.Refused() != before+1 {
		t.Errorf("anonymous HEAD: status %d, refused %d -> %d; want 401 and one more refusal", resp.StatusCode, before, r.Refused())
	}
}
