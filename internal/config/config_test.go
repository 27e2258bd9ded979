package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const examplePath = "../../configs/gateway.yaml"

// env returns a getenv func backed by vars.
func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func ptr[T any](v T) *T { return &v }

// problemLines returns err's problems, one formatted problem per element.
func problemLines(t *testing.T, err error) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, want Problems: %v", err, err)
	}
	return strings.Split(ps.Error(), "\n")
}

func TestLoadExample(t *testing.T) {
	got, err := Load(examplePath, env(map[string]string{"GITHUB_MCP_TOKEN": "tok-123"}))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:            ":8080",
			PublicURL:         "https://mcp.example.com/mcp",
			AdminListen:       "127.0.0.1:9090",
			MaxBodyBytes:      4 << 20,
			RequestTimeout:    Duration(5 * time.Minute),
			ReadHeaderTimeout: Duration(10 * time.Second),
			ListCacheTTL:      Duration(time.Minute),
		},
		Sessions: Sessions{
			Store:       "memory",
			IdleTTL:     Duration(30 * time.Minute),
			MaxSessions: 100000,
		},
		Upstreams: []Upstream{{
			Name:    "github",
			URL:     "http://127.0.0.1:9001/mcp",
			Prefix:  ptr("github"),
			Timeout: Duration(30 * time.Second),
			Headers: map[string]string{"Authorization": "Bearer tok-123"},
		}},
		Path: examplePath,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// TestExampleDocumentsEveryKey guards against adding a setting without
// describing it in the example file.
func TestExampleDocumentsEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{
		"server:", "listen:", "public_url:", "allowed_origins:", "admin_listen:",
		"max_body_bytes:", "request_timeout:", "read_header_timeout:", "list_cache_ttl:",
		"sessions:", "store:", "idle_ttl:", "max_sessions:",
		"upstreams:", "name:", "url:", "prefix:", "timeout:", "headers:",
	} {
		if !bytes.Contains(data, []byte(key)) {
			t.Errorf("%s does not mention %q", examplePath, key)
		}
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), env(nil))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing file: got %v, want an fs.ErrNotExist error", err)
	}
}

func TestParseDefaults(t *testing.T) {
	defaults := Config{
		Server: Server{
			Listen:            ":8080",
			MaxBodyBytes:      4 << 20,
			RequestTimeout:    Duration(5 * time.Minute),
			ReadHeaderTimeout: Duration(10 * time.Second),
			ListCacheTTL:      Duration(time.Minute),
		},
		Sessions: Sessions{
			Store:       "memory",
			IdleTTL:     Duration(30 * time.Minute),
			MaxSessions: 100000,
		},
		Path: "test.yaml",
	}
	withUpstream := defaults
	withUpstream.Upstreams = []Upstream{{Name: "a", URL: "http://a/mcp", Timeout: Duration(30 * time.Second)}}

	tests := []struct {
		name string
		yaml string
		want Config
	}{
		{name: "empty file", yaml: "", want: defaults},
		{name: "only comments", yaml: "# nothing here\n", want: defaults},
		{name: "empty document", yaml: "---\n", want: defaults},
		{name: "null sections", yaml: "server:\nsessions: ~\nupstreams:\n", want: defaults},
		{name: "explicit empty strings", yaml: "server:\n  listen: \"\"\nsessions:\n  store: \"\"\n", want: defaults},
		{name: "upstream timeout", yaml: "upstreams:\n  - name: a\n    url: http://a/mcp\n", want: withUpstream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("test.yaml", []byte(tt.yaml), env(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSettings(t *testing.T) {
	const yaml = `
server:
  listen: "127.0.0.1:8000"
  allowed_origins: ["https://a.example.com", "http://localhost:3000", "vscode-webview://abc"]
  max_body_bytes: 0x100000
  request_timeout: 1m30s
  read_header_timeout: 5s
  list_cache_ttl: 10s
sessions:
  idle_ttl: 1h
  max_sessions: 10
`
	got, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Server{
		Listen:            "127.0.0.1:8000",
		AllowedOrigins:    []string{"https://a.example.com", "http://localhost:3000", "vscode-webview://abc"},
		MaxBodyBytes:      1 << 20,
		RequestTimeout:    Duration(90 * time.Second),
		ReadHeaderTimeout: Duration(5 * time.Second),
		ListCacheTTL:      Duration(10 * time.Second),
	}
	if diff := cmp.Diff(want, got.Server); diff != "" {
		t.Errorf("Server mismatch (-want +got):\n%s", diff)
	}
	wantSessions := Sessions{Store: "memory", IdleTTL: Duration(time.Hour), MaxSessions: 10}
	if diff := cmp.Diff(wantSessions, got.Sessions); diff != "" {
		t.Errorf("Sessions mismatch (-want +got):\n%s", diff)
	}
}

func TestParsePrefix(t *testing.T) {
	tests := []struct {
		name       string
		prefixLine string
		wantPrefix *string
		wantEff    string
	}{
		{name: "absent", prefixLine: "", wantPrefix: nil, wantEff: "gh"},
		{name: "null", prefixLine: "    prefix:\n", wantPrefix: nil, wantEff: "gh"},
		{name: "tilde", prefixLine: "    prefix: ~\n", wantPrefix: nil, wantEff: "gh"},
		{name: "empty", prefixLine: "    prefix: \"\"\n", wantPrefix: ptr(""), wantEff: ""},
		{name: "set", prefixLine: "    prefix: git-hub\n", wantPrefix: ptr("git-hub"), wantEff: "git-hub"},
		{name: "null as a string", prefixLine: "    prefix: \"null\"\n", wantPrefix: ptr("null"), wantEff: "null"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "upstreams:\n  - name: gh\n    url: http://gh/mcp\n" + tt.prefixLine
			c, err := Parse("test.yaml", []byte(yaml), env(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			u := c.Upstream("gh")
			if diff := cmp.Diff(tt.wantPrefix, u.Prefix); diff != "" {
				t.Errorf("Prefix mismatch (-want +got):\n%s", diff)
			}
			if got := u.EffectivePrefix(); got != tt.wantEff {
				t.Errorf("EffectivePrefix() = %q, want %q", got, tt.wantEff)
			}
		})
	}
}

func TestParseEmptyPrefixesMayRepeat(t *testing.T) {
	const yaml = `
upstreams:
  - name: a
    url: http://a/mcp
    prefix: ""
  - name: b
    url: http://b/mcp
    prefix: ""
  - name: c
    url: http://c/mcp
    prefix: a
`
	// c's prefix "a" does not clash with upstream a, whose prefix is "".
	if _, err := Parse("test.yaml", []byte(yaml), env(nil)); err != nil {
		t.Errorf("Parse: %v", err)
	}
}

func TestConfigUpstream(t *testing.T) {
	c := &Config{Upstreams: []Upstream{{Name: "a"}, {Name: "b"}}}
	if u := c.Upstream("b"); u != &c.Upstreams[1] {
		t.Errorf("Upstream(%q) = %p, want %p", "b", u, &c.Upstreams[1])
	}
	if u := c.Upstream("c"); u != nil {
		t.Errorf("Upstream(%q) = %v, want nil", "c", u)
	}
}

func TestParseProblems(t *testing.T) {
	// up is a valid upstream to append items after; it is upstreams[0] on
	// lines 2-3.
	const up = "upstreams:\n  - name: up\n    url: http://up/mcp\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string
	}{
		{
			name: "syntax error",
			yaml: "server:\n  listen: :8080\n bad: x\n",
			// yaml.v3 reports the line of the mapping being parsed, not of
			// the bad key.
			want: []string{"test.yaml:2: invalid YAML: did not find expected key"},
		},
		{
			name: "unterminated quote",
			yaml: "server:\n  listen: \":8080\n",
			want: []string{"test.yaml:2: invalid YAML: found unexpected end of stream"},
		},
		{
			name: "two documents",
			yaml: "server: {}\n---\nsessions: {}\n",
			want: []string{"test.yaml:2: the file must hold a single YAML document"},
		},
		{
			name: "top level not a mapping",
			yaml: "- a\n- b\n",
			want: []string{"test.yaml:1: the top level must be a mapping"},
		},
		{
			name: "unknown top-level key",
			yaml: "server: {}\nupstream: []\n",
			want: []string{"test.yaml:2: upstream: unknown key (want one of server, sessions, upstreams)"},
		},
		{
			name: "unknown nested key",
			yaml: "server:\n  lisen: :8080\n",
			want: []string{"test.yaml:2: server.lisen: unknown key (want one of admin_listen, allowed_origins, list_cache_ttl, listen, max_body_bytes, public_url, read_header_timeout, request_timeout)"},
		},
		{
			name: "unknown upstream key",
			yaml: up + "    token: x\n",
			want: []string{"test.yaml:4: upstreams[0].token: unknown key (want one of headers, name, prefix, timeout, url)"},
		},
		{
			name: "duplicate key",
			yaml: "server:\n  listen: \":1\"\n  listen: \":2\"\n",
			want: []string{"test.yaml:3: server.listen: duplicate key (first defined at line 2)"},
		},
		{
			name: "duplicate section",
			yaml: "server: {}\nsessions: {}\nserver: {}\n",
			want: []string{"test.yaml:3: server: duplicate key (first defined at line 1)"},
		},
		{
			name: "merge key",
			yaml: "base: &b {listen: \":1\"}\n",
			want: []string{"test.yaml:1: base: unknown key (want one of server, sessions, upstreams)"},
		},
		{
			name: "merge key in section",
			yaml: "server:\n  <<: {listen: \":1\"}\n",
			want: []string{`test.yaml:2: server: merge keys ("<<") are not supported`},
		},
		{
			name: "non-string key",
			yaml: "server:\n  [a]: b\n",
			want: []string{"test.yaml:2: server: keys must be strings"},
		},
		{
			name: "section not a mapping",
			yaml: "server: :8080\n",
			want: []string{"test.yaml:1: server: must be a mapping"},
		},
		{
			name: "string where a list is expected",
			yaml: "server:\n  allowed_origins: https://a.example.com\n",
			want: []string{"test.yaml:2: server.allowed_origins: must be a list"},
		},
		{
			name: "upstreams not a list",
			yaml: "upstreams:\n  name: a\n",
			want: []string{"test.yaml:2: upstreams: must be a list"},
		},
		{
			name: "list where a string is expected",
			yaml: "server:\n  listen: [\":1\"]\n",
			want: []string{"test.yaml:2: server.listen: must be a string"},
		},
		{
			name: "non-string list item",
			yaml: "server:\n  allowed_origins:\n    - {a: b}\n    - ~\n    - nope\n",
			want: []string{
				"test.yaml:3: server.allowed_origins[0]: must be a string",
				"test.yaml:4: server.allowed_origins[1]: must be a string",
				`test.yaml:5: server.allowed_origins[2]: "nope" is not an origin: want scheme://host[:port], such as "https://app.example.com"`,
			},
		},
		{
			name: "bad duration",
			yaml: "server:\n  request_timeout: abc\n",
			want: []string{`test.yaml:2: server.request_timeout: must be a duration such as "30s" or "1m30s", got "abc"`},
		},
		{
			name: "duration without unit",
			yaml: "sessions:\n  idle_ttl: 30\n",
			want: []string{`test.yaml:2: sessions.idle_ttl: must be a duration such as "30s" or "1m30s", got "30"`},
		},
		{
			name: "duration not a scalar",
			yaml: "sessions:\n  idle_ttl: [1s]\n",
			want: []string{`test.yaml:2: sessions.idle_ttl: must be a duration such as "30s"`},
		},
		{
			name: "zero duration",
			yaml: up + "    timeout: 0s\n",
			want: []string{"test.yaml:4: upstreams[0].timeout: must be positive"},
		},
		{
			name: "negative duration",
			yaml: "server:\n  list_cache_ttl: -1m\n",
			want: []string{"test.yaml:2: server.list_cache_ttl: must be positive"},
		},
		{
			name: "non-integer size",
			yaml: "server:\n  max_body_bytes: 4MiB\n",
			want: []string{`test.yaml:2: server.max_body_bytes: must be an integer, got "4MiB"`},
		},
		{
			name: "float size",
			yaml: "server:\n  max_body_bytes: 1.5\n",
			want: []string{`test.yaml:2: server.max_body_bytes: must be an integer, got "1.5"`},
		},
		{
			name: "quoted size",
			yaml: "server:\n  max_body_bytes: \"1024\"\n",
			want: []string{`test.yaml:2: server.max_body_bytes: must be an integer, got "1024"`},
		},
		{
			name: "zero size",
			yaml: "server:\n  max_body_bytes: 0\n",
			want: []string{"test.yaml:2: server.max_body_bytes: must be positive"},
		},
		{
			name: "negative max sessions",
			yaml: "sessions:\n  max_sessions: -5\n",
			want: []string{"test.yaml:2: sessions.max_sessions: must be positive"},
		},
		{
			name: "redis store",
			yaml: "sessions:\n  store: redis\n",
			want: []string{`test.yaml:2: sessions.store: "redis" is not supported yet (memory only)`},
		},
		{
			name: "unknown store",
			yaml: "sessions:\n  store: disk\n",
			want: []string{`test.yaml:2: sessions.store: unknown store "disk": must be "memory"`},
		},
		{
			name: "listen without port",
			yaml: "server:\n  listen: localhost\n",
			want: []string{`test.yaml:2: server.listen: invalid address "localhost": want host:port, such as ":8080" or "127.0.0.1:9090"`},
		},
		{
			name: "listen with a bad port",
			yaml: "server:\n  listen: \":http\"\n  admin_listen: \":99999\"\n",
			want: []string{
				`test.yaml:2: server.listen: invalid port in ":http": want a number from 0 to 65535`,
				`test.yaml:3: server.admin_listen: invalid port in ":99999": want a number from 0 to 65535`,
			},
		},
		{
			name: "listen as an integer",
			yaml: "server:\n  listen: 8080\n",
			want: []string{`test.yaml:2: server.listen: invalid address "8080": want host:port, such as ":8080" or "127.0.0.1:9090"`},
		},
		{
			name: "admin on the main listener",
			yaml: "server:\n  admin_listen: \":8080\"\n",
			want: []string{"test.yaml:2: server.admin_listen: must differ from server.listen"},
		},
		{
			name: "bad public url",
			yaml: "server:\n  public_url: /mcp\n",
			want: []string{"test.yaml:2: server.public_url: must be an absolute http or https URL"},
		},
		{
			name: "public url with another scheme",
			yaml: "server:\n  public_url: ftp://mcp.example.com/mcp\n",
			want: []string{"test.yaml:2: server.public_url: must be an absolute http or https URL"},
		},
		{
			name: "bad origins",
			yaml: "server:\n  allowed_origins:\n    - https://a.example.com/\n    - \"*\"\n    - https://a.example.com?x\n    - https://a.example.com:99x\n    - HTTPS://B.example.com:8443\n",
			want: []string{
				`test.yaml:3: server.allowed_origins[0]: "https://a.example.com/" is not an origin: want scheme://host[:port], such as "https://app.example.com"`,
				`test.yaml:4: server.allowed_origins[1]: "*" is not an origin: want scheme://host[:port], such as "https://app.example.com"`,
				`test.yaml:5: server.allowed_origins[2]: "https://a.example.com?x" is not an origin: want scheme://host[:port], such as "https://app.example.com"`,
				`test.yaml:6: server.allowed_origins[3]: "https://a.example.com:99x" is not an origin: want scheme://host[:port], such as "https://app.example.com"`,
			},
		},
		{
			name: "upstream missing name and url",
			yaml: "upstreams:\n  - timeout: 1s\n",
			want: []string{
				"test.yaml:2: upstreams[0].name: is required",
				"test.yaml:2: upstreams[0].url: is required",
			},
		},
		{
			name: "upstream item not a mapping",
			yaml: up + "  - github\n  -\n",
			want: []string{
				"test.yaml:4: upstreams[1]: must be a mapping",
				"test.yaml:5: upstreams[2]: must be a mapping",
			},
		},
		{
			name: "bad names",
			yaml: up + "  - name: GitHub\n    url: http://a/mcp\n  - name: a_b\n    url: http://b/mcp\n  - name: abcdefghijklmnopqrstuvwxyz0123456\n    url: http://c/mcp\n",
			want: []string{
				`test.yaml:4: upstreams[1].name: "GitHub" must contain only a-z, 0-9 and -`,
				`test.yaml:6: upstreams[2].name: "a_b" must contain only a-z, 0-9 and -`,
				`test.yaml:8: upstreams[3].name: "abcdefghijklmnopqrstuvwxyz0123456" is longer than 32 characters`,
			},
		},
		{
			name: "duplicate names",
			yaml: up + "  - name: up\n    url: http://other/mcp\n    prefix: other\n",
			want: []string{`test.yaml:4: upstreams[1].name: duplicate upstream name "up" (also upstreams[0])`},
		},
		{
			name: "bad prefixes",
			yaml: up + "    prefix: Up\n  - name: b\n    url: http://b/mcp\n    prefix: \"a.b\"\n",
			want: []string{
				`test.yaml:4: upstreams[0].prefix: "Up" must contain only a-z, 0-9 and - ("" for no namespace)`,
				`test.yaml:7: upstreams[1].prefix: "a.b" must contain only a-z, 0-9 and - ("" for no namespace)`,
			},
		},
		{
			name: "prefix clashes with a set prefix",
			yaml: up + "    prefix: x\n  - name: b\n    url: http://b/mcp\n    prefix: x\n",
			want: []string{`test.yaml:7: upstreams[1].prefix: prefix "x" is already used by upstreams[0]; set a distinct prefix`},
		},
		{
			name: "prefix clashes with a name",
			yaml: up + "  - name: b\n    url: http://b/mcp\n    prefix: up\n",
			want: []string{`test.yaml:6: upstreams[1].prefix: prefix "up" is already used by upstreams[0]; set a distinct prefix`},
		},
		{
			name: "name clashes with a prefix",
			yaml: "upstreams:\n  - name: a\n    url: http://a/mcp\n    prefix: b\n  - name: b\n    url: http://b/mcp\n",
			want: []string{`test.yaml:5: upstreams[1].name: prefix "b" is already used by upstreams[0]; set a distinct prefix`},
		},
		{
			name: "bad upstream urls",
			yaml: "upstreams:\n" +
				"  - name: a\n    url: 127.0.0.1:9001/mcp\n" +
				"  - name: b\n    url: /mcp\n" +
				"  - name: c\n    url: ws://c/mcp\n" +
				"  - name: d\n    url: \"http://\"\n" +
				"  - name: e\n    url: \"http://%zz\"\n",
			want: []string{
				"test.yaml:3: upstreams[0].url: must be an absolute http or https URL",
				"test.yaml:5: upstreams[1].url: must be an absolute http or https URL",
				"test.yaml:7: upstreams[2].url: must be an absolute http or https URL",
				"test.yaml:9: upstreams[3].url: must be an absolute http or https URL",
				"test.yaml:11: upstreams[4].url: must be an absolute http or https URL",
			},
		},
		{
			name: "credentials in url",
			yaml: "upstreams:\n  - name: a\n    url: https://user:hunter2@a.example.com/mcp\n",
			want: []string{"test.yaml:3: upstreams[0].url: must not contain credentials (user:password@); put them in headers"},
		},
		{
			name: "headers not a mapping",
			yaml: up + "    headers: [Authorization]\n",
			want: []string{"test.yaml:4: upstreams[0].headers: must be a mapping"},
		},
		{
			name: "bad header names",
			yaml: up + "    headers:\n      X-Ok: a\n      \"Bad Name\": b\n      \"X:Colon\": c\n",
			want: []string{
				"test.yaml:6: upstreams[0].headers: header name on this line is not a valid HTTP field name",
				"test.yaml:7: upstreams[0].headers: header name on this line is not a valid HTTP field name",
			},
		},
		{
			name: "duplicate header names",
			yaml: up + "    headers:\n      X-Api-Key: a\n      x-api-key: b\n      X-Api-Key: c\n",
			want: []string{
				"test.yaml:6: upstreams[0].headers.x-api-key: duplicate header (same as X-Api-Key; names are case-insensitive)",
				"test.yaml:7: upstreams[0].headers.X-Api-Key: duplicate key (first defined at line 5)",
			},
		},
		{
			name: "header value not a string",
			yaml: up + "    headers:\n      X-A: [a]\n      X-B:\n",
			want: []string{
				"test.yaml:5: upstreams[0].headers.X-A: must be a string",
				`test.yaml:6: upstreams[0].headers: a header has no value (write "" for an empty one)`,
			},
		},
		{
			name: "unset variable",
			yaml: up + "    headers:\n      Authorization: Bearer ${TOKEN}\n",
			want: []string{"test.yaml:5: upstreams[0].headers.Authorization: environment variable TOKEN is not set"},
		},
		{
			name: "empty variable",
			yaml: up + "    headers:\n      Authorization: Bearer ${TOKEN}\n",
			env:  map[string]string{"TOKEN": ""},
			want: []string{"test.yaml:5: upstreams[0].headers.Authorization: environment variable TOKEN is not set"},
		},
		{
			name: "unterminated variable",
			yaml: up + "    headers:\n      Authorization: Bearer ${TOKEN\n",
			env:  map[string]string{"TOKEN": "x"},
			want: []string{`test.yaml:5: upstreams[0].headers.Authorization: unterminated "${" (write "$$" for a literal "$")`},
		},
		{
			name: "variable expands to a newline",
			yaml: up + "    headers:\n      Authorization: Bearer ${TOKEN}\n",
			env:  map[string]string{"TOKEN": "a\r\nX-Evil: 1"},
			want: []string{"test.yaml:5: upstreams[0].headers.Authorization: value contains control characters (after ${VAR} expansion)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(tt.yaml), env(tt.env))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error; got %v", c)
			}
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseReportsEveryProblem(t *testing.T) {
	const yaml = `server:
  listen: nope
  public_url: mcp.example.com
  max_body_bytes: lots
  colour: blue
sessions:
  store: redis
  idle_ttl: forever
upstreams:
  - name: Bad_Name
    url: ftp://x
    headers:
      Authorization: Bearer ${MISSING}
  - name: ok
    url: http://ok/mcp
    prefix: UPPER
  - name: ok
    url: http://ok2/mcp
    prefix: other
`
	want := []string{
		`cfg.yaml:2: server.listen: invalid address "nope": want host:port, such as ":8080" or "127.0.0.1:9090"`,
		"cfg.yaml:3: server.public_url: must be an absolute http or https URL",
		`cfg.yaml:4: server.max_body_bytes: must be an integer, got "lots"`,
		"cfg.yaml:5: server.colour: unknown key (want one of admin_listen, allowed_origins, list_cache_ttl, listen, max_body_bytes, public_url, read_header_timeout, request_timeout)",
		`cfg.yaml:7: sessions.store: "redis" is not supported yet (memory only)`,
		`cfg.yaml:8: sessions.idle_ttl: must be a duration such as "30s" or "1m30s", got "forever"`,
		`cfg.yaml:10: upstreams[0].name: "Bad_Name" must contain only a-z, 0-9 and -`,
		"cfg.yaml:11: upstreams[0].url: must be an absolute http or https URL",
		"cfg.yaml:13: upstreams[0].headers.Authorization: environment variable MISSING is not set",
		`cfg.yaml:16: upstreams[1].prefix: "UPPER" must contain only a-z, 0-9 and - ("" for no namespace)`,
		`cfg.yaml:17: upstreams[2].name: duplicate upstream name "ok" (also upstreams[1])`,
	}
	_, err := Parse("cfg.yaml", []byte(yaml), env(nil))
	if diff := cmp.Diff(want, problemLines(t, err)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestParseAliases(t *testing.T) {
	const yaml = `
sessions:
  idle_ttl: &ttl 10m
upstreams:
  - name: a
    url: http://a/mcp
    timeout: *ttl
    headers: &h
      X-Key: ${KEY}
  - name: b
    url: http://b/mcp
    headers: *h
`
	c, err := Parse("test.yaml", []byte(yaml), env(map[string]string{"KEY": "k"}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := c.Upstreams[0].Timeout, Duration(10*time.Minute); got != want {
		t.Errorf("timeout = %v, want %v", got, want)
	}
	if diff := cmp.Diff(map[string]string{"X-Key": "k"}, c.Upstreams[1].Headers); diff != "" {
		t.Errorf("headers mismatch (-want +got):\n%s", diff)
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "alpha", "B_2": "beta", "DOLLAR": "$x"}
	tests := []struct {
		name     string
		in       string
		want     string
		wantErrs []string
	}{
		{name: "no variables", in: "plain", want: "plain"},
		{name: "empty", in: "", want: ""},
		{name: "one variable", in: "Bearer ${A}", want: "Bearer alpha"},
		{name: "several variables", in: "${A}:${B_2}", want: "alpha:beta"},
		{name: "whole value", in: "${A}", want: "alpha"},
		{name: "escaped dollar", in: "$$", want: "$"},
		{name: "escaped reference", in: "$${A}", want: "${A}"},
		{name: "escape then variable", in: "$$$${A}${A}", want: "$${A}alpha"},
		{name: "lone dollar", in: "a$b", want: "a$b"},
		{name: "trailing dollar", in: "cost$", want: "cost$"},
		{name: "dollar before brace-less name", in: "$A", want: "$A"},
		{name: "values are not expanded again", in: "${DOLLAR}", want: "$x"},
		{name: "unset", in: "x${NOPE}y", wantErrs: []string{"environment variable NOPE is not set"}},
		{
			name:     "two unset",
			in:       "${X1}${X2}",
			wantErrs: []string{"environment variable X1 is not set", "environment variable X2 is not set"},
		},
		{name: "unterminated", in: "Bearer ${A", wantErrs: []string{`unterminated "${" (write "$$" for a literal "$")`}},
		{name: "empty name", in: "${}", wantErrs: []string{`empty variable name in "${}"`}},
		{
			name:     "invalid name",
			in:       "${1A}",
			wantErrs: []string{`invalid variable name in "${...}": want letters, digits and underscores, not starting with a digit`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := expand(tt.in, env(vars))
			if got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if diff := cmp.Diff(tt.wantErrs, errs); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSecretsNeverLeak(t *testing.T) {
	const secret = "s3cr3t-t0k3n"
	vars := map[string]string{"TOKEN": secret, "NEWLINE": secret + "\n"}
	tests := []struct {
		name string
		yaml string
	}{
		{name: "unset variable next to a literal secret", yaml: "headers:\n      Authorization: " + secret + " ${UNSET}\n"},
		{name: "unterminated reference", yaml: "headers:\n      Authorization: ${" + secret + "\n"},
		{name: "secret as a variable name", yaml: "headers:\n      Authorization: ${" + secret + "}\n"},
		{name: "control character", yaml: "headers:\n      Authorization: ${NEWLINE}\n"},
		{name: "literal control character", yaml: "headers:\n      Authorization: \"" + secret + "\\u0000\"\n"},
		{name: "bad header name", yaml: "headers:\n      \"Bearer " + secret + "\": x\n"},
		{name: "secret as a key without value", yaml: "headers: {" + secret + "}\n"},
		{name: "value is a list", yaml: "headers:\n      Authorization: [" + secret + "]\n"},
		{name: "value is a mapping", yaml: "headers:\n      Authorization: {Bearer: " + secret + "}\n"},
		{name: "headers is a string", yaml: "headers: \"Authorization: Bearer " + secret + "\"\n"},
		{name: "headers is a list", yaml: "headers:\n      - \"Authorization: Bearer " + secret + "\"\n"},
		{name: "bad binary value", yaml: "headers:\n      Authorization: !!binary " + secret + "\n"},
		{name: "syntax error after value", yaml: "headers:\n      Authorization: \"" + secret + "\n"},
		{name: "syntax error in value", yaml: "headers:\n      Authorization: Bearer: " + secret + "\n"},
		{name: "secret in url", yaml: "headers: {}\n  - name: b\n    url: https://" + secret + "@b/mcp\n"},
		{name: "secret in url password", yaml: "headers: {}\n  - name: b\n    url: https://u:" + secret + "@b/mcp\n"},
		{name: "secret in invalid url", yaml: "headers: {}\n  - name: b\n    url: \"" + secret + "%zz\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "upstreams:\n  - name: a\n    url: http://a/mcp\n    " + tt.yaml
			_, err := Parse("test.yaml", []byte(yaml), env(vars))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error contains the secret:\n%v", err)
			}
		})
	}

	t.Run("printing a config", func(t *testing.T) {
		yaml := "upstreams:\n  - name: a\n    url: http://a/mcp\n    headers:\n      Authorization: Bearer ${TOKEN}\n      X-Literal: " + secret + "\n"
		c, err := Parse("test.yaml", []byte(yaml), env(vars))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		if got := c.Upstreams[0].Headers["Authorization"]; got != "Bearer "+secret {
			t.Fatalf("Authorization = %q, want the expanded secret", got)
		}
		var logs bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, nil))
		logger.Info("loaded", "upstream", c.Upstreams[0], "upstream_ptr", &c.Upstreams[0])
		slog.New(slog.NewTextHandler(&logs, nil)).Info("loaded", "upstream", c.Upstreams[0])
		for _, s := range []string{
			fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", *c),
			fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", *c), fmt.Sprint(c.Upstreams), c.Upstreams[0].String(),
			fmt.Sprint(c.Upstream("a")), logs.String(),
		} {
			if strings.Contains(s, secret) {
				t.Errorf("output contains the secret:\n%s", s)
			}
			if !strings.Contains(s, "Authorization") {
				t.Errorf("output does not name the header:\n%s", s)
			}
		}
	})

	t.Run("printing a code-built config", func(t *testing.T) {
		u := Upstream{Name: "a", URL: "https://" + secret + "@a/mcp"}
		if s := fmt.Sprint(u); strings.Contains(s, secret) {
			t.Errorf("output contains the secret:\n%s", s)
		}
	})
}

func TestValidate(t *testing.T) {
	valid := func() *Config {
		return &Config{Upstreams: []Upstream{{Name: "a", URL: "http://a/mcp", Headers: map[string]string{"X-Key": "k"}}}}
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string
	}{
		{name: "valid, before defaults", modify: func(c *Config) {}},
		{name: "valid, after defaults", modify: func(c *Config) { c.ApplyDefaults() }},
		{
			name:   "with path",
			modify: func(c *Config) { c.Path = "gw.yaml"; c.Upstreams[0].Name = "" },
			want:   []string{"gw.yaml: upstreams[0].name: is required"},
		},
		{
			name: "several problems",
			modify: func(c *Config) {
				c.Server.RequestTimeout = -1
				c.Server.MaxBodyBytes = -1
				c.Sessions.Store = "redis"
				c.Upstreams = append(c.Upstreams, Upstream{Name: "b", URL: "http://b", Prefix: ptr("a")})
				c.Upstreams[0].Headers["X-Bad"] = "a\nb"
			},
			want: []string{
				"server.max_body_bytes: must be positive",
				"server.request_timeout: must be positive",
				`sessions.store: "redis" is not supported yet (memory only)`,
				"upstreams[0].headers.X-Bad: value contains control characters (after ${VAR} expansion)",
				`upstreams[1].prefix: prefix "a" is already used by upstreams[0]; set a distinct prefix`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.modify(c)
			err := c.Validate()
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplyDefaultsKeepsSetValues(t *testing.T) {
	c := &Config{
		Server:    Server{Listen: ":1", MaxBodyBytes: 1},
		Sessions:  Sessions{MaxSessions: 2},
		Upstreams: []Upstream{{Timeout: Duration(time.Second)}, {}},
	}
	c.ApplyDefaults()
	if c.Server.Listen != ":1" || c.Server.MaxBodyBytes != 1 || c.Sessions.MaxSessions != 2 {
		t.Errorf("ApplyDefaults overwrote set values: %+v", c)
	}
	if got, want := c.Upstreams[0].Timeout, Duration(time.Second); got != want {
		t.Errorf("Upstreams[0].Timeout = %v, want %v", got, want)
	}
	if got, want := c.Upstreams[1].Timeout, Duration(DefaultUpstreamTimeout); got != want {
		t.Errorf("Upstreams[1].Timeout = %v, want %v", got, want)
	}
}

func TestProblemError(t *testing.T) {
	tests := []struct {
		name string
		p    Problem
		want string
	}{
		{name: "everything", p: Problem{File: "f.yaml", Line: 3, Col: 5, Path: "server.listen", Msg: "bad"}, want: "f.yaml:3: server.listen: bad"},
		{name: "no line", p: Problem{File: "f.yaml", Path: "server.listen", Msg: "bad"}, want: "f.yaml: server.listen: bad"},
		{name: "no file", p: Problem{Line: 3, Path: "server.listen", Msg: "bad"}, want: "3: server.listen: bad"},
		{name: "no file or line", p: Problem{Path: "server.listen", Msg: "bad"}, want: "server.listen: bad"},
		{name: "no path", p: Problem{File: "f.yaml", Line: 1, Msg: "bad"}, want: "f.yaml:1: bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Error(); got != tt.want {
				t.Errorf("Error() = %q, want %q", got, tt.want)
			}
		})
	}

	ps := Problems{{File: "f", Line: 1, Msg: "a"}, {File: "f", Line: 2, Msg: "b"}}
	if got, want := ps.Error(), "f:1: a\nf:2: b"; got != want {
		t.Errorf("Problems.Error() = %q, want %q", got, want)
	}
}

func TestDurationText(t *testing.T) {
	d := Duration(90 * time.Second)
	text, err := d.MarshalText()
	if err != nil || string(text) != "1m30s" {
		t.Errorf("MarshalText() = %q, %v; want \"1m30s\", nil", text, err)
	}
	var got Duration
	if err := got.UnmarshalText(text); err != nil || got != d {
		t.Errorf("UnmarshalText(%q) = %v, %v; want %v, nil", text, got, err, d)
	}
	if err := got.UnmarshalText([]byte("abc")); err == nil {
		t.Error("UnmarshalText(\"abc\") succeeded, want an error")
	}
}

func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(examplePath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(""))
	f.Add([]byte("upstreams:\n  - name: a\n    url: http://a\n    headers: {X: \"$${A}${B\"}\n"))
	f.Add([]byte("a: &a [*a]\n"))
	getenv := env(map[string]string{"GITHUB_MCP_TOKEN": "tok"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, getenv)
		if (c == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v; want exactly one", c, err)
		}
		if err != nil {
			var ps Problems
			if !errors.As(err, &ps) || len(ps) == 0 {
				t.Fatalf("error is %T with %d problems, want a non-empty Problems", err, len(ps))
			}
			return
		}
		// A config that parsed is valid.
		if err := c.Validate(); err != nil {
			t.Fatalf("Validate of a parsed config: %v", err)
		}
	})
}

func TestReservedHeaders(t *testing.T) {
	yaml := "upstreams:\n  - name: a\n    url: http://127.0.0.1:1/mcp\n    headers:\n      mcp-session-id: x\n      Authorization: y\n"
	_, err := Parse("f.yaml", []byte(yaml), func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "f.yaml:5: upstreams[0].headers.mcp-session-id: is set by the gateway itself") {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "Authorization") {
		t.Fatalf("unexpected problem with Authorization: %v", err)
	}
}
