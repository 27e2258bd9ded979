package generation

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/testkit"
)

const base = `
auth: {anonymous: true}
upstreams:
  - name: alpha
    url: http://127.0.0.1:1/mcp
  - name: beta
    url: http://127.0.0.1:2/mcp
tenants:
  - id: default
    upstreams: []
  - id: t1
    upstreams: [{name: alpha}]
  - id: t2
    upstreams: [{name: beta}]
`

func parse(t *testing.T, y string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(y), func(string) string { return "" })
	if err != nil {
		t.Fatalf("%v\n%s", err, y)
	}
	return cfg
}

func shared() *Shared {
	return &Shared{Guards: budget.NewGuards(), Processes: pipe.NewLimit(0), Log: slog.New(slog.DiscardHandler)}
}

func build(t *testing.T, cfg *config.Config, prev *State, sh *Shared) *State {
	t.Helper()
	p, err := Prepare(cfg, prev, sh)
	if err != nil {
		t.Fatal(err)
	}
	st := Build(p, prev, sh)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// A reload keeps the Upstream (its client, its connections) of every
// upstream whose config did not change, and says which ones it replaced
// and which tenants see something else.
func TestBuildKeepsUnchangedUpstreams(t *testing.T) {
	sh := shared()
	prev := build(t, parse(t, base), nil, sh)
	if got := prev.Names(); !slices.Equal(got, []string{"alpha", "beta"}) {
		t.Fatalf("names %v", got)
	}
	next := build(t, parse(t, strings.Replace(base, "127.0.0.1:2", "127.0.0.1:3", 1)), prev, sh)
	if next.ByName["alpha"] != prev.ByName["alpha"] {
		t.Error("alpha's config did not change, yet it was rebuilt")
	}
	if next.ByName["beta"] == prev.ByName["beta"] {
		t.Error("beta's URL changed, yet it kept its client")
	}
	if got := Replaced(prev, next); !slices.Equal(got, []string{"beta"}) {
		t.Errorf("Replaced = %v, want [beta]", got)
	}
	if TenantChanged(prev, next, "t1") {
		t.Error("t1 sees only alpha, which did not change")
	}
	if !TenantChanged(prev, next, "t2") {
		t.Error("t2 sees beta, which changed")
	}
	if !TenantChanged(prev, next, "nobody") {
		t.Error("an unknown tenant must count as changed")
	}
}

// Release closes what only the old State held, through the caller's
// runner, or at once when the runner refuses (its owner is closing).
func TestReleaseRunsOrClosesAtOnce(t *testing.T) {
	sh := shared()
	prev := build(t, parse(t, base), nil, sh)
	next := build(t, parse(t, strings.Replace(base, "127.0.0.1:2", "127.0.0.1:3", 1)), prev, sh)
	var queued []func()
	Release(prev, next, func(f func()) bool { queued = append(queued, f); return true }, sh.Log)
	if len(queued) != 1 {
		t.Fatalf("%d releases queued, want 1 (beta's client)", len(queued))
	}
	queued[0]()
	ran := 0
	Release(prev, next, func(func()) bool { ran++; return false }, sh.Log) // a second Close of a client is harmless
	if ran != 1 {
		t.Errorf("runner asked %d times, want 1", ran)
	}
}

// A config Prepare refuses changes nothing shared: a signing key file that
// is no key fails the reload, and the State in force keeps its signer.
func TestPrepareRefusesUnusableKeys(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "identity.pem")
	testkit.WriteSigningKey(t, keyFile)
	cfg := parse(t, base)
	cfg.Upstreams[0].Auth = &config.UpstreamAuth{Mode: config.AuthSignedIdentity}
	cfg.Identity.SigningKeys = []string{keyFile}
	cfg.Server.PublicURL = "https://gw.example.com/mcp"
	sh := shared()
	prev := build(t, cfg, nil, sh)
	if prev.Signer == nil || !prev.PerRequest {
		t.Fatalf("signer %v, per-request %v: a signed-identity upstream needs both", prev.Signer, prev.PerRequest)
	}
	if err := Check(cfg); err != nil {
		t.Errorf("Check of a usable config: %v", err)
	}
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	next := *cfg
	next.Upstreams = slices.Clone(cfg.Upstreams)
	next.Upstreams[0].Timeout = config.Duration(7 * time.Second)
	if _, err := Prepare(&next, prev, sh); err == nil {
		t.Fatal("Prepare accepted a key file that holds no key")
	}
	if err := Check(&next); err == nil {
		t.Error("Check accepted a key file that holds no key")
	}
	if prev.ByName["alpha"].Creds == nil {
		t.Error("the State in force lost its credentials")
	}
}

// Origins are those configured and the public URL's, compared
// case-insensitively.
func TestAllowsOrigin(t *testing.T) {
	st := build(t, parse(t, base+`
server:
  public_url: https://GW.example.com/mcp
  allowed_origins: [https://app.example.com]
`), nil, shared())
	for o, want := range map[string]bool{
		"https://gw.example.com": true, "https://APP.example.com": true, "https://evil.example.com": false,
	} {
		if got := st.AllowsOrigin(o); got != want {
			t.Errorf("AllowsOrigin(%q) = %v, want %v", o, got, want)
		}
	}
}

// TestUpstreamStates: one state per upstream, in config order, with what
// its gate, breaker, health and the catalog's listings say.
func TestUpstreamStates(t *testing.T) {
	cfg := parse(t, strings.Replace(base, "    url: http://127.0.0.1:1/mcp\n",
		"    url: http://127.0.0.1:1/mcp\n    concurrency: {max_in_flight: 2}\n    circuit_breaker: {failures: 3}\n", 1))
	st := build(t, cfg, nil, shared())
	failed := errors.New("refused")
	last := func(name string) (error, bool) {
		if name == "alpha" {
			return failed, true
		}
		return nil, false
	}
	lists := map[string][]catalog.ListStat{"beta": {{}}}
	got := st.UpstreamStates(last, lists)
	if len(got) != 2 || got[0].Name != "alpha" || got[1].Name != "beta" {
		t.Fatalf("states %+v", got)
	}
	a, b := got[0], got[1]
	if !a.Tried || a.LastError != failed || a.Circuit != "closed" || a.InFlight != 0 || a.Processes != nil || a.Lists != nil {
		t.Errorf("alpha: %+v", a)
	}
	if b.Tried || b.LastError != nil || b.Circuit != "" || len(b.Lists) != 1 {
		t.Errorf("beta: %+v", b)
	}
}
