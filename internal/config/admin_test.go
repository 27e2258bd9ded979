package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestAdminConsole: the bearer is required with admin.console.auth, long
// enough, never quoted in a problem, and redacted when printed; an auth
// without an admin listener is a warning.
func TestAdminConsole(t *testing.T) {
	const secret = "0123456789abcdef0123456789abcdef"
	base := anon + "upstreams:\n  - name: a\n    url: http://a/mcp\nserver:\n  admin_listen: 127.0.0.1:9090\n"
	c, err := Parse("test.yaml", []byte(base+"admin:\n  console:\n    auth:\n      bearer: ${B}\n"), env(map[string]string{"B": secret}))
	if err != nil {
		t.Fatal(err)
	}
	if c.Admin.Console.Auth == nil || c.Admin.Console.Auth.Bearer != secret {
		t.Fatalf("admin.console.auth = %+v", c.Admin.Console.Auth)
	}
	js, _ := json.Marshal(c.Admin)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Admin), string(js)} {
		if strings.Contains(s, secret) {
			t.Errorf("output contains the bearer: %s", s)
		}
	}
	for _, tc := range []struct{ yaml, want string }{
		{"admin:\n  console:\n    auth: {}\n", "admin.console.auth.bearer: is required"},
		{"admin:\n  console:\n    auth:\n      bearer: short-" + "xyz\n", "must be at least 32 characters, got 9"},
	} {
		_, err := Parse("test.yaml", []byte(base+tc.yaml), env(nil))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "short-xyz") {
			t.Errorf("the problem quotes the bearer: %v", err)
		}
	}
	c, err = Parse("test.yaml", []byte(anon+"upstreams:\n  - name: a\n    url: http://a/mcp\nadmin:\n  console:\n    auth:\n      bearer: "+secret+"\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0].Error(), "server.admin_listen is not set") {
		t.Errorf("warnings = %v, want one about server.admin_listen", c.Warnings)
	}
}

func TestLoopbackAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9090": true, "[::1]:9090": true, "localhost:9090": true, "127.1.2.3:1": true,
		":9090": false, "0.0.0.0:9090": false, "10.0.0.1:9090": false, "[::]:9090": false, "example.com:9090": false,
	} {
		if got := LoopbackAddr(addr); got != want {
			t.Errorf("LoopbackAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestAdminConsoleOIDC: the OIDC sign-in needs an issuer, a client, the
// console's callback and an allow-list; it excludes a bearer; its problems
// name their line and never quote the client secret, which is redacted
// when printed.
func TestAdminConsoleOIDC(t *testing.T) {
	const secret = "s3cret-of-the-console-client"
	base := anon + "upstreams:\n  - name: a\n    url: http://a/mcp\nserver:\n  admin_listen: :9090\nadmin:\n  console:\n    auth:\n"
	good := "      oidc:\n        issuer: https://idp.example\n        client_id: console\n        client_secret: ${S}\n" +
		"        redirect_url: https://admin.example/console/callback\n        subjects: [alice]\n"
	c, err := Parse("test.yaml", []byte(base+good), env(map[string]string{"S": secret}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Admin.Console.Auth.OIDC
	if o == nil || o.ClientSecret != secret || o.ClientID != "console" || len(o.Subjects) != 1 || !slices.Equal(o.OIDCScopes(), []string{"openid"}) {
		t.Fatalf("admin.console.auth.oidc = %+v", o)
	}
	js, _ := json.Marshal(c.Admin)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Admin), string(js), fmt.Sprint(*c.Admin.Console.Auth)} {
		if strings.Contains(s, secret) {
			t.Errorf("output contains the client secret: %s", s)
		}
	}
	if !strings.Contains(fmt.Sprint(*c.Admin.Console.Auth), "client_id: console") {
		t.Errorf("String() = %s", c.Admin.Console.Auth)
	}

	for _, tc := range []struct{ name, yaml, want string }{
		{"both", "      bearer: 0123456789abcdef0123456789abcdef\n" + good, "test.yaml:10: admin.console.auth: set bearer or oidc, not both"},
		{"no issuer", "      oidc:\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        subjects: [a]\n", "test.yaml:11: admin.console.auth.oidc.issuer: is required"},
		{"http issuer", "      oidc:\n        issuer: http://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        subjects: [a]\n", "test.yaml:12: admin.console.auth.oidc.issuer: must be https"},
		{"no client", "      oidc:\n        issuer: https://idp.example\n        redirect_url: https://a.example/console/callback\n        subjects: [a]\n", "admin.console.auth.oidc.client_id: is required"},
		{"no redirect", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        subjects: [a]\n", "admin.console.auth.oidc.redirect_url: is required"},
		{"redirect elsewhere", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/callback\n        subjects: [a]\n", "test.yaml:14: admin.console.auth.oidc.redirect_url: must end in /console/callback"},
		{"http redirect", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: http://a.example/console/callback\n        subjects: [a]\n", "admin.console.auth.oidc.redirect_url: must be https"},
		{"no openid", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        scopes: [groups]\n        subjects: [a]\n", "admin.console.auth.oidc.scopes: must include openid"},
		{"nobody", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n", "test.yaml:11: admin.console.auth.oidc: needs subjects or groups"},
		{"empty subject", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        subjects: [\"\"]\n", "admin.console.auth.oidc.subjects[0]: must not be empty"},
		{"groups without claim", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        groups: [ops]\n", "admin.console.auth.oidc.groups_claim: is required with groups"},
		{"claim without groups", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        subjects: [a]\n        groups_claim: groups\n", "admin.console.auth.oidc.groups: is required with groups_claim"},
		{"bad claim path", "      oidc:\n        issuer: https://idp.example\n        client_id: c\n        redirect_url: https://a.example/console/callback\n        groups_claim: a..b\n        groups: [ops]\n", "admin.console.auth.oidc.groups_claim: must be a claim name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("test.yaml", []byte(base+tc.yaml), env(nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}

	// Groups alone, on loopback http, with a nested claim: fine.
	c, err = Parse("test.yaml", []byte(base+"      oidc:\n        issuer: http://127.0.0.1:8080/realms/x\n        client_id: c\n"+
		"        redirect_url: http://127.0.0.1:9090/console/callback\n        scopes: [openid, groups]\n        groups_claim: realm_access.roles\n        groups: [ops]\n"), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Admin.Console.Auth.OIDC.OIDCScopes(); !slices.Equal(got, []string{"openid", "groups"}) {
		t.Errorf("scopes %v", got)
	}
}
