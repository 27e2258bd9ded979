package config

import (
	"encoding/json"
	"fmt"
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
