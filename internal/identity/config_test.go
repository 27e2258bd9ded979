package identity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
)

// TestForConfig: a config whose upstreams sign nothing has no signer; one
// that signs keeps the previous signer until what it was made from
// changes.
func TestForConfig(t *testing.T) {
	none := &config.Config{Upstreams: []config.Upstream{{Name: "a"}}}
	if m, err := ForConfig(none, Made{}, nil); err != nil || m.Signer != nil {
		t.Fatalf("no signed identity: %+v, %v", m, err)
	}
	signing := func(url string) *config.Config {
		return &config.Config{
			Server:    config.Server{PublicURL: url},
			Upstreams: []config.Upstream{{Name: "a", Auth: &config.UpstreamAuth{Mode: config.AuthSignedIdentity}}},
		}
	}
	first, err := ForConfig(signing("https://gw.example"), Made{}, nil)
	if err != nil || first.Signer == nil {
		t.Fatalf("signed identity: %+v, %v", first, err)
	}
	if again, err := ForConfig(signing("https://gw.example"), first, nil); err != nil || again.Signer != first.Signer {
		t.Errorf("unchanged settings made a new signer (%v)", err)
	}
	if moved, err := ForConfig(signing("https://other.example"), first, nil); err != nil || moved.Signer == first.Signer {
		t.Errorf("a new public URL kept the signer (%v)", err)
	}
	bad := signing("https://gw.example")
	bad.Identity.SigningKeys = []string{filepath.Join(t.TempDir(), "missing.pem")}
	if _, err := ForConfig(bad, first, nil); err == nil {
		t.Error("a missing key file was accepted")
	}
}

// TestKeyFilesSum: the digest follows the files' contents, and is empty
// for no files or an unreadable one.
func TestKeyFilesSum(t *testing.T) {
	f := filepath.Join(t.TempDir(), "k.pem")
	if err := os.WriteFile(f, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	a := keyFilesSum([]string{f})
	if err := os.WriteFile(f, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if b := keyFilesSum([]string{f}); a == "" || b == "" || a == b {
		t.Errorf("sums %q, %q: want two different ones", a, b)
	}
	if keyFilesSum(nil) != "" || keyFilesSum([]string{f + ".missing"}) != "" {
		t.Error("no files, or a missing one, have a sum")
	}
}
