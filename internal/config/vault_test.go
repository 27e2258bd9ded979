package config

import (
	"errors"
	"strings"
	"testing"
)

func TestVaultProblems(t *testing.T) {
	const head = "auth:\n  anonymous: true\nupstreams:\n  - name: gh\n    url: http://gh/mcp\n    auth:\n      mode: user_oauth\n"
	key := "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVowMTIzNDU=" // 32 bytes
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"no keys", head + "      client_id: gw\n", []string{"test.yaml:7: upstreams[0].auth.mode: mode user_oauth needs vault.keys: at least one key is required"}},
		{"no client", head + "vault:\n  keys:\n    - id: k1\n      secret: " + key + "\n", []string{"test.yaml:6: upstreams[0].auth.client_id: is required with mode user_oauth"}},
		{"bad key", head + "      client_id: gw\nvault:\n  keys:\n    - id: k1\n      secret: c2hvcnQ=\n    - id: k1\n      secret: " + key + "\n  consent_ttl: 2h\n",
			[]string{
				"test.yaml:12: vault.keys[0].secret: must be 32 bytes, base64-encoded: it decodes to 5 bytes, not 32",
				"test.yaml:13: vault.keys[1].id: key id \"k1\" is listed twice",
				"test.yaml:15: vault.consent_ttl: must be from 1s to 1h",
			}},
		{"token_url", head + "      client_id: gw\n      token_url: http://as/token\nvault:\n  keys:\n    - id: k1\n      secret: " + key + "\n",
			[]string{"test.yaml:9: upstreams[0].auth.token_url: does not apply to mode user_oauth: give issuer (or none, for discovery from the upstream)"}},
	}
	tests = append(tests, struct {
		name, yaml string
		want       []string
	}{"login", "auth:\n  issuers:\n    - name: corp\n      issuer_url: https://idp.example\nupstreams:\n  - name: gh\n    url: http://gh/mcp\n    auth:\n      mode: user_oauth\n      client_id: gw\nvault:\n  keys:\n    - id: k1\n      secret: " + key + "\n  login:\n    issuer: https://other.example\n",
		[]string{"test.yaml:15: vault.login.client_id: is required", "test.yaml:16: vault.login.issuer: must be the issuer_url of one of auth.issuers"}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(tc.yaml), func(string) string { return "" })
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("want problems, got %v", err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.Error())
			}
			// The login case has the problems of an issuer config beside.
			if g := strings.Join(got, "\n"); g != strings.Join(tc.want, "\n") && (tc.name != "login" || !strings.HasSuffix(g, strings.Join(tc.want, "\n"))) {
				t.Fatalf("got:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
	ok := head + "      client_id: gw\n      scopes: [repo]\nvault:\n  keys:\n    - id: k1\n      secret: " + key + "\n"
	c, err := Parse("test.yaml", []byte(ok), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Vault.ConsentTTL.D().String() != "10m0s" || !c.UsesUserOAuth() || c.Vault.PendingPerTenant != 2500 {
		t.Fatalf("defaults: %+v %v", c.Vault, c.Warnings)
	}
	// Discovery open (no issuer, no vault.discovered_issuers): warned of.
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Error(), "test.yaml:6: upstreams[0].auth.issuer: is not set and vault.discovered_issuers is empty") {
		t.Fatalf("warnings: %v", c.Warnings)
	}
	// Restricted: no warning. An issuer with a query: a problem.
	if c, err := Parse("test.yaml", []byte(ok+"  discovered_issuers: [https://as.example/tenant1]\n  pending: 8\n"), nil); err != nil || len(c.Warnings) != 0 ||
		c.Vault.PendingPerTenant != 2 || len(c.Vault.DiscoveredIssuers) != 1 {
		t.Fatalf("restricted: %v %v %+v", err, c.Warnings, c.Vault)
	}
	if _, err := Parse("test.yaml", []byte(ok+"  discovered_issuers: [\"https://as.example/?a=b\", \"ftp://x\"]\n"), nil); err == nil ||
		!strings.Contains(err.Error(), "vault.discovered_issuers[0]: must be an issuer identifier, without query or fragment") ||
		!strings.Contains(err.Error(), "vault.discovered_issuers[1]: must be an absolute http or https URL") {
		t.Fatalf("bad issuers: %v", err)
	}
	c, err = Parse("test.yaml", []byte(strings.Replace(ok, "client_id: gw", "client_id: gw\n      client_secret: s3cret", 1)), nil)
	if err != nil || len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Error(), "test.yaml:6: upstreams[0].auth.issuer: is not set") || strings.Contains(c.Warnings[0].Error(), "s3cret") {
		t.Fatalf("warnings: %v %v", c.Warnings, err)
	}
}
