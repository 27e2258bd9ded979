package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const examplePath = "../../configs/gateway.yaml"

// anon is an auth section that satisfies the "issuers or anonymous" rule,
// for tests about other sections.
const anon = "auth:\n  anonymous: true\n"

// defaultAuth and defaultRedis are what ApplyDefaults gives an anonymous
// config.
var (
	defaultAuth = Auth{
		Anonymous:      true,
		Leeway:         Duration(30 * time.Second),
		TokenCacheSize: 10000,
	}
	defaultRedis = Redis{
		Addrs:     []string{"127.0.0.1:6379"},
		KeyPrefix: "mcpgw:",
		Timeout:   Duration(500 * time.Millisecond),
	}
	defaultVault = Vault{
		ConsentTTL: Duration(10 * time.Minute), PendingPerPrincipal: 8, Pending: 10000, PendingPerTenant: 2500,
		TokensPerTenant: 10000, Tokens: 100000,
	}
	defaultTelemetry = Telemetry{
		Tracing: Tracing{SampleRatio: ptr(1.0)},
		Audit:   Audit{Output: "stderr"},
	}
)

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
			ReadBodyTimeout:   Duration(30 * time.Second),
			ListCacheTTL:      Duration(time.Minute),
			DrainDelay:        ptr(Duration(5 * time.Second)),
			ShutdownGrace:     Duration(25 * time.Second),
		},
		Sessions: Sessions{
			Store:           "memory",
			IdleTTL:         Duration(30 * time.Minute),
			MaxSessions:     100000,
			MaxPerPrincipal: 100, MaxPerTenant: 10000, MailboxMessages: 64, MailboxBytes: 8 << 20, Tasks: defaultTasks, Events: defaultEvents,
			Redis: defaultRedis,
		},
		Upstreams: []Upstream{{
			Name:           "github",
			URL:            "http://127.0.0.1:9001/mcp",
			Prefix:         ptr("github"),
			Timeout:        Duration(30 * time.Second),
			Headers:        map[string]string{"Authorization": "Bearer tok-123"},
			AuditArguments: "none",
		}, {
			Name:           "search",
			URL:            "http://127.0.0.1:9002/mcp",
			Timeout:        Duration(30 * time.Second),
			AuditArguments: "none",
		}},
		Auth: Auth{
			Issuers: []Issuer{{
				Name:        "corp",
				IssuerURL:   "https://idp.example.com",
				Audiences:   []string{"https://mcp.example.com/mcp"},
				TenantClaim: "tenant",
				Algorithms:  []string{"RS256", "PS256", "ES256", "EdDSA"},
			}},
			RequiredScopes: []string{"mcp"},
			Leeway:         Duration(30 * time.Second),
			TokenCacheSize: 10000,
		},
		Tenants: []Tenant{{
			ID: "acme",
			Upstreams: []TenantUpstream{{
				Name:           "github",
				Tools:          Rules{Allow: []string{"list_*", "get_*", "create_issue"}, Deny: []string{"delete_*"}},
				Prompts:        Rules{Allow: []string{"*"}},
				Resources:      Rules{Allow: []string{"repo://acme/*"}},
				RequiredScopes: map[string][]string{"create_issue": {"mcp:write"}},
			}, {
				Name: "search",
			}},
		}, {
			ID:        "globex",
			Upstreams: []TenantUpstream{{Name: "search"}},
		}},
		Limits:    defaultLimits,
		Telemetry: defaultTelemetry,
		Vault:     defaultVault,
		Path:      examplePath,
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
		"redis:", "addrs:", "master_name:", "username:", "password:", "db:", "tls:", "key_prefix:",
		"auth:", "issuers:", "issuer_url:", "audiences:", "tenant_claim:", "tenant:", "jwks_url:",
		"algorithms:", "required_scopes:", "leeway:", "token_cache_size:", "anonymous:",
		"tenants:", "id:", "tools:", "prompts:", "resources:", "allow:", "deny:", "annotations:",
		"title:", "readOnlyHint:", "destructiveHint:", "idempotentHint:", "openWorldHint:",
		"audit_arguments:", "telemetry:", "tracing:", "enabled:", "endpoint:", "sample_ratio:",
		"audit:", "output:", "pprof:", "ca_file:", "cert_file:", "key_file:", "server_name:",
		"instructions:", "mode:", "text:", "validation:", "arguments:", "results:",
		"present:", "alias:", "description:", "fixed_arguments:", "tool_search:", "max_results:",
		"pin:", "on_change:", "new:", "pins:", "file:",
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

var defaultLimits = Limits{
	StreamsPerPrincipal: 32, StreamsPerTenant: 10000, BatchMessages: 50,
	ClientInfoBytes: 8 << 10, ClientCapabilitiesBytes: 64 << 10,
	ParkedCallsPerPrincipal: 16, DetachedCallsPerPrincipal: 16, ListPages: 100, ListBytes: 16 << 20, StdioProcesses: 256, UpstreamStreams: 10_000,
	DetachedCalls: 1024, DetachedCallsPerTenant: 256, UpstreamStreamsPerPrincipal: 625, UpstreamStreamsPerTenant: 5000,
}

func TestParseDefaults(t *testing.T) {
	defaults := Config{
		Server: Server{
			Listen:            ":8080",
			MaxBodyBytes:      4 << 20,
			RequestTimeout:    Duration(5 * time.Minute),
			ReadHeaderTimeout: Duration(10 * time.Second),
			ReadBodyTimeout:   Duration(30 * time.Second),
			ListCacheTTL:      Duration(time.Minute),
			DrainDelay:        ptr(Duration(5 * time.Second)),
			ShutdownGrace:     Duration(25 * time.Second),
		},
		Sessions: Sessions{
			Store:           "memory",
			IdleTTL:         Duration(30 * time.Minute),
			MaxSessions:     100000,
			MaxPerPrincipal: 100, MaxPerTenant: 10000, MailboxMessages: 64, MailboxBytes: 8 << 20, Tasks: defaultTasks, Events: defaultEvents,
			Redis: defaultRedis,
		},
		Auth:      defaultAuth,
		Limits:    defaultLimits,
		Telemetry: defaultTelemetry,
		Vault:     defaultVault,
		Path:      "test.yaml",
	}
	withUpstream := defaults
	withUpstream.Upstreams = []Upstream{{Name: "a", URL: "http://a/mcp", Timeout: Duration(30 * time.Second), AuditArguments: "none"}}

	tests := []struct {
		name string
		yaml string
		want Config
	}{
		{name: "only anonymous", yaml: anon, want: defaults},
		{name: "comments", yaml: "# nothing here\n" + anon, want: defaults},
		{name: "document marker", yaml: "---\n" + anon, want: defaults},
		{name: "null sections", yaml: "server:\nsessions: ~\nupstreams:\ntenants:\n" + anon + "  issuers:\n  required_scopes: ~\n", want: defaults},
		{name: "null redis and auth settings", yaml: "sessions:\n  redis:\n    addrs:\n    password:\n" + anon + "  leeway:\n", want: defaults},
		{name: "explicit empty strings", yaml: "server:\n  listen: \"\"\nsessions:\n  store: \"\"\n  redis:\n    password: \"\"\n" + anon, want: defaults},
		{name: "upstream timeout", yaml: "upstreams:\n  - name: a\n    url: http://a/mcp\n" + anon, want: withUpstream},
		{name: "null telemetry", yaml: "telemetry:\n" + anon, want: defaults},
		{name: "null telemetry settings", yaml: "telemetry:\n  tracing:\n    sample_ratio:\n    endpoint: ~\n  audit:\n    output:\n  pprof:\n" + anon, want: defaults},
		{name: "null audit_arguments", yaml: "upstreams:\n  - name: a\n    url: http://a/mcp\n    audit_arguments:\n" + anon, want: withUpstream},
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
  read_body_timeout: 7s
  list_cache_ttl: 10s
  drain_delay: 0s
  shutdown_grace: 20s
sessions:
  idle_ttl: 1h
  max_sessions: 10
  max_per_principal: 3
  max_per_tenant: 4
  mailbox_messages: 5
  mailbox_bytes: 6000
limits:
  streams_per_principal: 1
  streams_per_tenant: 2
  batch_messages: 3
  client_info_bytes: 4
  client_capabilities_bytes: 5
  list_pages: 6
  list_bytes: 7
` + anon
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
		ReadBodyTimeout:   Duration(7 * time.Second),
		ListCacheTTL:      Duration(10 * time.Second),
		DrainDelay:        ptr(Duration(0)),
		ShutdownGrace:     Duration(20 * time.Second),
	}
	if diff := cmp.Diff(want, got.Server); diff != "" {
		t.Errorf("Server mismatch (-want +got):\n%s", diff)
	}
	wantSessions := Sessions{Store: "memory", IdleTTL: Duration(time.Hour), MaxSessions: 10,
		MaxPerPrincipal: 3, MaxPerTenant: 4, MailboxMessages: 5, MailboxBytes: 6000, Events: defaultEvents, Redis: defaultRedis, Tasks: defaultTasks}
	if diff := cmp.Diff(wantSessions, got.Sessions); diff != "" {
		t.Errorf("Sessions mismatch (-want +got):\n%s", diff)
	}
	wantLimits := Limits{StreamsPerPrincipal: 1, StreamsPerTenant: 2, BatchMessages: 3, ClientInfoBytes: 4,
		ClientCapabilitiesBytes: 5, ParkedCallsPerPrincipal: 16, DetachedCallsPerPrincipal: 16, ListPages: 6, ListBytes: 7, StdioProcesses: 256, UpstreamStreams: 10_000,
		DetachedCalls: 1024, DetachedCallsPerTenant: 256, UpstreamStreamsPerPrincipal: 625, UpstreamStreamsPerTenant: 5000}
	if diff := cmp.Diff(wantLimits, got.Limits); diff != "" {
		t.Errorf("Limits mismatch (-want +got):\n%s", diff)
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
			yaml := anon + "upstreams:\n  - name: gh\n    url: http://gh/mcp\n" + tt.prefixLine
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
` + anon
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
	// Each YAML gets anon appended unless it has an auth section or raw is
	// set.
	tests := []struct {
		name string
		yaml string
		raw  bool
		env  map[string]string
		want []string
	}{
		{
			name: "empty file",
			yaml: "",
			raw:  true,
			want: []string{"test.yaml: auth.issuers: at least one issuer is required (or set auth.anonymous: true for local development only)"},
		},
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
			raw:  true,
			want: []string{"test.yaml:1: the top level must be a mapping"},
		},
		{
			name: "unknown top-level key",
			yaml: "server: {}\nupstream: []\n",
			want: []string{"test.yaml:2: upstream: unknown key (want one of admin, auth, budgets, identity, limits, pins, policy, server, sessions, telemetry, tenants, upstreams, vault)"},
		},
		{
			name: "unknown nested key",
			yaml: "server:\n  lisen: :8080\n",
			want: []string{"test.yaml:2: server.lisen: unknown key (want one of admin_listen, allowed_origins, drain_delay, list_cache_ttl, listen, max_body_bytes, public_url, read_body_timeout, read_header_timeout, request_timeout, shutdown_grace)"},
		},
		{
			name: "instructions",
			yaml: "upstreams:\n" +
				"  - {name: a, url: http://a/mcp, instructions: {mode: loud}}\n" +
				"  - {name: b, url: http://b/mcp, instructions: {mode: override}}\n" +
				"  - {name: c, url: http://c/mcp, instructions: {text: hi}}\n" +
				"  - {name: d, url: http://d/mcp, instructions: {mode: override, text: " + strings.Repeat("x", MaxInstructionsBytes+1) + "}}\n" +
				"  - {name: e, url: http://e/mcp, instructions: {mode: off}}\n",
			want: []string{
				`test.yaml:2: upstreams[0].instructions.mode: unknown mode "loud": must be "upstream", "override" or "off"`,
				`test.yaml:3: upstreams[1].instructions.text: is required with mode "override" (mode "off" gives none)`,
				`test.yaml:4: upstreams[2].instructions.text: is used only with mode "override"`,
				`test.yaml:5: upstreams[3].instructions.text: is 4097 bytes, more than 4096`,
			},
		},
		{
			name: "validation",
			yaml: "upstreams:\n" +
				"  - {name: a, url: http://a/mcp, validation: {arguments: warn, results: strict}}\n" +
				"  - {name: b, url: http://b/mcp, validation: {arguments: off, results: enforce}}\n",
			want: []string{
				`test.yaml:2: upstreams[0].validation.arguments: unknown mode "warn": must be "enforce" or "off"`,
				`test.yaml:2: upstreams[0].validation.results: unknown mode "strict": must be "off", "warn" or "enforce"`,
			},
		},
		{
			name: "present",
			yaml: "upstreams:\n" +
				"  - {name: a, url: http://a/mcp}\n" +
				"  - {name: b, url: http://b/mcp}\n" +
				"tenants:\n" +
				"  - id: t\n" +
				"    upstreams:\n" +
				"      - {name: a, present: {x: {alias: new_issue}, y: {alias: \"bad name\"}, z: {alias: " + strings.Repeat("n", 65) + "}}}\n" +
				"      - {name: b, present: {x: {alias: new_issue, fixed_arguments: {\"\": v}}, \"\": {description: d}}}\n" +
				"  - id: u\n" +
				"    upstreams:\n" +
				"      - {name: a, present: {x: {alias: new_issue}}}\n",
			want: []string{
				`test.yaml:7: tenants[0].upstreams[0].present.y.alias: "bad name" must be 1 to 64 characters of A-Z, a-z, 0-9, "_", "-" and "."`,
				`test.yaml:7: tenants[0].upstreams[0].present.z.alias: "` + strings.Repeat("n", 65) + `" must be 1 to 64 characters of A-Z, a-z, 0-9, "_", "-" and "."`,
				`test.yaml:8: tenants[0].upstreams[1].present.x.alias: "new_issue" is already the alias of tenants[0].upstreams[0].present.x`,
				`test.yaml:8: tenants[0].upstreams[1].present.x.fixed_arguments: an argument name must not be empty`,
				`test.yaml:8: tenants[0].upstreams[1].present[""]: tool name must not be empty`,
				`test.yaml:13: auth.anonymous: tenant "default" must be configured when tenants are listed`,
			},
		},
		{
			name: "tool search",
			yaml: "upstreams:\n" +
				"  - {name: a, url: http://a/mcp}\n" +
				"tenants:\n" +
				"  - {id: t, tool_search: {mode: sometimes, max_results: 51}}\n" +
				"  - {id: default, tool_search: {mode: beside}}\n",
			want: []string{
				`test.yaml:4: tenants[0].tool_search.mode: unknown mode "sometimes": must be "replace" or "beside"`,
				`test.yaml:4: tenants[0].tool_search.max_results: must be from 1 to 50`,
			},
		},
		{
			name: "unknown upstream key",
			yaml: up + "    token: x\n",
			want: []string{"test.yaml:4: upstreams[0].token: unknown key (want one of audit_arguments, auth, circuit_breaker, command, concurrency, env, guards, headers, instructions, lists, name, openapi, pin, prefix, stdio, timeout, tls, transport, url, validation, watch, working_dir)"},
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
			want: []string{"test.yaml:1: base: unknown key (want one of admin, auth, budgets, identity, limits, pins, policy, server, sessions, telemetry, tenants, upstreams, vault)"},
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
			name: "task bounds",
			yaml: "sessions:\n  tasks:\n    max_per_principal: 0\n    max_ttl: -1s\n    list_page_size: 5000\n",
			want: []string{
				"test.yaml:3: sessions.tasks.max_per_principal: must be positive",
				"test.yaml:4: sessions.tasks.max_ttl: must be positive",
				"test.yaml:5: sessions.tasks.list_page_size: must be at most 1000",
			},
		},
		{
			name: "unknown store",
			yaml: "sessions:\n  store: disk\n",
			want: []string{`test.yaml:2: sessions.store: unknown store "disk": must be "memory" or "redis"`},
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
			name: "drain delay as long as the default grace",
			yaml: "server:\n  drain_delay: 25s\n",
			want: []string{"test.yaml:2: server.drain_delay: must be shorter than server.shutdown_grace (25s)"},
		},
		{
			name: "drain delay longer than the grace",
			yaml: "server:\n  drain_delay: 3s\n  shutdown_grace: 2s\n",
			want: []string{"test.yaml:2: server.drain_delay: must be shorter than server.shutdown_grace (2s)"},
		},
		{
			name: "negative shutdown grace",
			yaml: "server:\n  shutdown_grace: -1s\n",
			want: []string{"test.yaml:2: server.shutdown_grace: must be positive"},
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
			yaml := tt.yaml
			if !tt.raw && !strings.Contains(yaml, "auth:") {
				yaml += anon
			}
			c, err := Parse("test.yaml", []byte(yaml), env(tt.env))
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
auth:
  issuers:
    - name: corp
      issuer_url: http://idp.example.com
      tenant_claim: tenant
      algorithms: [HS256]
  leeway: soon
tenants:
  - id: acme
    upstreams:
      - name: gitlab
        tools: {allow: ["[z-a"]}
  - id: acme
`
	want := []string{
		`cfg.yaml:2: server.listen: invalid address "nope": want host:port, such as ":8080" or "127.0.0.1:9090"`,
		"cfg.yaml:3: server.public_url: must be an absolute http or https URL",
		`cfg.yaml:4: server.max_body_bytes: must be an integer, got "lots"`,
		"cfg.yaml:5: server.colour: unknown key (want one of admin_listen, allowed_origins, drain_delay, list_cache_ttl, listen, max_body_bytes, public_url, read_body_timeout, read_header_timeout, request_timeout, shutdown_grace)",
		`cfg.yaml:8: sessions.idle_ttl: must be a duration such as "30s" or "1m30s", got "forever"`,
		`cfg.yaml:10: upstreams[0].name: "Bad_Name" must contain only a-z, 0-9 and -`,
		"cfg.yaml:11: upstreams[0].url: must be an absolute http or https URL",
		"cfg.yaml:13: upstreams[0].headers.Authorization: environment variable MISSING is not set",
		`cfg.yaml:16: upstreams[1].prefix: "UPPER" must contain only a-z, 0-9 and - ("" for no namespace)`,
		`cfg.yaml:17: upstreams[2].name: duplicate upstream name "ok" (also upstreams[1])`,
		"cfg.yaml:23: auth.issuers[0].issuer_url: must be https (http is accepted only on a loopback host: 127.0.0.0/8, ::1 or localhost)",
		`cfg.yaml:25: auth.issuers[0].algorithms[0]: HMAC algorithms are not accepted: a resource server must verify with public keys (got "HS256")`,
		`cfg.yaml:26: auth.leeway: must be a duration such as "30s" or "1m30s", got "soon"`,
		`cfg.yaml:30: tenants[0].upstreams[0].name: unknown upstream "gitlab"`,
		`cfg.yaml:31: tenants[0].upstreams[0].tools.allow[0]: "[z-a" is not a valid glob pattern (path.Match syntax: "*", "?", "[a-z]", "\" escapes)`,
		`cfg.yaml:32: tenants[1].id: duplicate tenant id "acme" (also tenants[0])`,
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
` + anon
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
			yaml := anon + "upstreams:\n  - name: a\n    url: http://a/mcp\n    " + tt.yaml
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
		yaml := "upstreams:\n  - name: a\n    url: http://a/mcp\n    headers:\n      Authorization: Bearer ${TOKEN}\n      X-Literal: " + secret + "\n" + anon
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
		return &Config{
			Upstreams: []Upstream{{Name: "a", URL: "http://a/mcp", Headers: map[string]string{"X-Key": "k"}}},
			Auth:      Auth{Anonymous: true},
		}
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
				c.Sessions.Store = "disk"
				c.Upstreams = append(c.Upstreams, Upstream{Name: "b", URL: "http://b", Prefix: ptr("a")})
				c.Upstreams[0].Headers["X-Bad"] = "a\nb"
			},
			want: []string{
				"server.max_body_bytes: must be positive",
				"server.request_timeout: must be positive",
				`sessions.store: unknown store "disk": must be "memory" or "redis"`,
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
	f.Add([]byte(fullYAML))
	f.Add([]byte(anon + "tenants:\n  - id: default\n    upstreams: []\n"))
	getenv := env(map[string]string{"GITHUB_MCP_TOKEN": "tok", "REDIS_PW": "pw"})
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

// fullYAML sets every auth, tenant and Redis setting.
const fullYAML = `server:
  public_url: https://mcp.example.com/mcp
  admin_listen: 127.0.0.1:9090
sessions:
  store: redis
  redis:
    addrs: ["redis-0.redis:26379", "[::1]:26379"]
    master_name: mymaster
    username: gw
    password: "pw-${REDIS_PW}"
    db: 2
    tls: true
    key_prefix: "gw1:"
    timeout: 250ms
upstreams:
  - name: github
    url: https://gh.example.com/mcp
    audit_arguments: hash
  - name: search
    url: http://127.0.0.1:9002/mcp
auth:
  issuers:
    - name: corp
      issuer_url: https://idp.example.com
      tenant_claim: org.tenant
    - name: local-dex
      issuer_url: http://127.0.0.1:5556/dex
      audiences: [gw, "https://other.example.com"]
      tenant: acme
      jwks_url: http://localhost:5556/dex/keys
      algorithms: [ES256, EdDSA]
  required_scopes: [mcp, "mcp:read"]
  leeway: 1m
  token_cache_size: 50
  anonymous: false
tenants:
  - id: acme
    upstreams:
      - name: github
        tools: {allow: ["list_*", "list.*", create_issue], deny: ["delete_*"]}
        prompts: {allow: []}
        resources: {deny: ["repo://secret/*"]}
        required_scopes:
          create_issue: ["mcp:write", "repo"]
        annotations:
          create_issue:
            title: Create an issue
            readOnlyHint: false
            destructiveHint: false
            idempotentHint: false
            openWorldHint: true
          list_repos: {readOnlyHint: true}
          list.v2: {}
      - name: search
  - id: globex.eu
    upstreams: []
  - id: Initech_2
telemetry:
  tracing:
    enabled: true
    endpoint: http://otel-collector:4318
    sample_ratio: 0.25
  audit:
    output: /var/log/mcpgw/audit.log
  pprof: true
`

func TestParseFull(t *testing.T) {
	got, err := Parse("test.yaml", []byte(fullYAML), env(map[string]string{"REDIS_PW": "hunter2"}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:            ":8080",
			PublicURL:         "https://mcp.example.com/mcp",
			AdminListen:       "127.0.0.1:9090",
			MaxBodyBytes:      4 << 20,
			RequestTimeout:    Duration(5 * time.Minute),
			ReadHeaderTimeout: Duration(10 * time.Second),
			ReadBodyTimeout:   Duration(30 * time.Second),
			ListCacheTTL:      Duration(time.Minute),
			DrainDelay:        ptr(Duration(5 * time.Second)),
			ShutdownGrace:     Duration(25 * time.Second),
		},
		Sessions: Sessions{
			Store:           "redis",
			IdleTTL:         Duration(30 * time.Minute),
			MaxSessions:     100000,
			MaxPerPrincipal: 100, MaxPerTenant: 10000, MailboxMessages: 64, MailboxBytes: 8 << 20, Tasks: defaultTasks, Events: defaultEvents,
			Redis: Redis{
				Addrs:      []string{"redis-0.redis:26379", "[::1]:26379"},
				MasterName: "mymaster",
				Username:   "gw",
				Password:   "pw-hunter2",
				DB:         2,
				TLS:        true,
				KeyPrefix:  "gw1:",
				Timeout:    Duration(250 * time.Millisecond),
			},
		},
		Upstreams: []Upstream{
			{Name: "github", URL: "https://gh.example.com/mcp", Timeout: Duration(30 * time.Second), AuditArguments: "hash"},
			{Name: "search", URL: "http://127.0.0.1:9002/mcp", Timeout: Duration(30 * time.Second), AuditArguments: "none"},
		},
		Auth: Auth{
			Issuers: []Issuer{{
				Name:        "corp",
				IssuerURL:   "https://idp.example.com",
				Audiences:   []string{"https://mcp.example.com/mcp"},
				TenantClaim: "org.tenant",
				Algorithms:  []string{"RS256", "PS256", "ES256", "EdDSA"},
			}, {
				Name:       "local-dex",
				IssuerURL:  "http://127.0.0.1:5556/dex",
				Audiences:  []string{"gw", "https://other.example.com"},
				Tenant:     "acme",
				JWKSURL:    "http://localhost:5556/dex/keys",
				Algorithms: []string{"ES256", "EdDSA"},
			}},
			RequiredScopes: []string{"mcp", "mcp:read"},
			Leeway:         Duration(time.Minute),
			TokenCacheSize: 50,
		},
		Tenants: []Tenant{{
			ID: "acme",
			Upstreams: []TenantUpstream{{
				Name:           "github",
				Tools:          Rules{Allow: []string{"list_*", "list.*", "create_issue"}, Deny: []string{"delete_*"}},
				Prompts:        Rules{Allow: []string{}},
				Resources:      Rules{Deny: []string{"repo://secret/*"}},
				RequiredScopes: map[string][]string{"create_issue": {"mcp:write", "repo"}},
				Annotations: map[string]ToolAnnotations{
					"create_issue": {
						Title:           ptr("Create an issue"),
						ReadOnlyHint:    ptr(false),
						DestructiveHint: ptr(false),
						IdempotentHint:  ptr(false),
						OpenWorldHint:   ptr(true),
					},
					"list_repos": {ReadOnlyHint: ptr(true)},
					"list.v2":    {},
				},
			}, {
				Name: "search",
			}},
		}, {
			ID:        "globex.eu",
			Upstreams: []TenantUpstream{},
		}, {
			ID: "Initech_2",
		}},
		Limits: defaultLimits,
		Telemetry: Telemetry{
			Tracing: Tracing{Enabled: true, Endpoint: "http://otel-collector:4318", SampleRatio: ptr(0.25)},
			Audit:   Audit{Output: "/var/log/mcpgw/audit.log"},
			Pprof:   true,
		},
		Vault: defaultVault,
		Path:  "test.yaml",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	// nil and empty mean different things: every upstream or item, or none.
	if got.Tenants[2].Upstreams != nil || got.Tenants[1].Upstreams == nil {
		t.Errorf("tenant upstreams: absent gave %#v, [] gave %#v", got.Tenants[2].Upstreams, got.Tenants[1].Upstreams)
	}
	tu := got.Tenants[0].Upstreams[0]
	if tu.Tools.Allow == nil || tu.Prompts.Allow == nil || tu.Resources.Allow != nil {
		t.Errorf("allow lists: got %#v, %#v, %#v", tu.Tools.Allow, tu.Prompts.Allow, tu.Resources.Allow)
	}
	// The full example also passes Validate, and parses without warnings.
	if err := got.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	if got.Warnings != nil {
		t.Errorf("Warnings = %v, want none", got.Warnings)
	}
}

func TestParseAnonymousWithTenants(t *testing.T) {
	yaml := anon + "tenants:\n  - id: default\n  - id: other\n"
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if !c.Auth.Anonymous || len(c.Tenants) != 2 {
		t.Errorf("got %+v", c)
	}
}

func TestParseAuthProblems(t *testing.T) {
	// tenant is a tenants section for configs with issuers.
	const tenant = "tenants:\n  - id: acme\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "no auth section",
			yaml: "server: {}\n",
			want: []string{"test.yaml: auth.issuers: at least one issuer is required (or set auth.anonymous: true for local development only)"},
		},
		{
			name: "empty issuers",
			yaml: "auth:\n  issuers: []\n",
			want: []string{"test.yaml:2: auth.issuers: at least one issuer is required (or set auth.anonymous: true for local development only)"},
		},
		{
			name: "anonymous false",
			yaml: "auth:\n  anonymous: false\n",
			want: []string{"test.yaml:1: auth.issuers: at least one issuer is required (or set auth.anonymous: true for local development only)"},
		},
		{
			name: "anonymous as a string",
			yaml: "auth:\n  anonymous: \"true\"\n",
			want: []string{`test.yaml:2: auth.anonymous: must be true or false, got "true"`},
		},
		{
			name: "anonymous as yes",
			yaml: "auth:\n  anonymous: yes\n",
			want: []string{`test.yaml:2: auth.anonymous: must be true or false, got "yes"`},
		},
		{
			name: "anonymous and issuers",
			yaml: "auth:\n  anonymous: true\n  issuers:\n    - name: a\n      issuer_url: https://a\n      tenant: acme\n      audiences: [x]\n" + tenant,
			want: []string{"test.yaml:2: auth.anonymous: cannot be combined with auth.issuers: anonymous access is for local development only"},
		},
		{
			name: "anonymous without the default tenant",
			yaml: anon + tenant,
			want: []string{`test.yaml:2: auth.anonymous: tenant "default" must be configured when tenants are listed`},
		},
		{
			name: "issuers without tenants",
			yaml: "auth:\n  issuers:\n    - name: a\n      issuer_url: https://a\n      tenant_claim: t\n      audiences: [x]\n",
			want: []string{"test.yaml: tenants: at least one tenant is required when auth.issuers are configured"},
		},
		{
			name: "issuers with an empty tenants list",
			yaml: "auth:\n  issuers:\n    - name: a\n      issuer_url: https://a\n      tenant: acme\n      audiences: [x]\ntenants: []\n",
			want: []string{"test.yaml:7: tenants: at least one tenant is required when auth.issuers are configured"},
		},
		{
			name: "issuer names and urls",
			yaml: "auth:\n  issuers:\n" +
				"    - name: Corp_1\n      issuer_url: http://idp.example.com\n      tenant_claim: t\n      audiences: [x]\n" + // 3-6
				"    - issuer_url: https://u:p@idp.example.com\n      tenant_claim: t\n      audiences: [x]\n      jwks_url: ftp://idp/keys\n" + // 7-10
				"    - name: c\n      issuer_url: https://idp.example.com/?x=1\n      tenant_claim: t\n      audiences: [x]\n      jwks_url: http://[::1]:8080/k\n" + // 11-15
				"    - name: c\n      issuer_url: https://idp.example.com#f\n      tenant_claim: t\n      audiences: [x]\n" + // 16-19
				"    - name: e\n      issuer_url: http://localhost:5556\n      tenant_claim: t\n      audiences: [x]\n      jwks_url: http://10.0.0.1/keys\n" + // 20-24
				"    - name: f\n      issuer_url: http://127.0.0.2:5556\n      tenant_claim: t\n      audiences: [x]\n" + // 25-28
				"    - name: g\n      issuer_url: http://localhost:5556\n      tenant_claim: t\n      audiences: [x]\n" + // 29-32
				"    - name: h\n      tenant_claim: t\n      audiences: [x]\n      issuer_url: /relative\n" + // 33-36
				"    - name: i\n      tenant_claim: t\n      audiences: [x]\n" + // 37-39
				tenant,
			want: []string{
				`test.yaml:3: auth.issuers[0].name: "Corp_1" must contain only a-z, 0-9 and -`,
				"test.yaml:4: auth.issuers[0].issuer_url: must be https (http is accepted only on a loopback host: 127.0.0.0/8, ::1 or localhost)",
				"test.yaml:7: auth.issuers[1].name: is required",
				"test.yaml:7: auth.issuers[1].issuer_url: must not contain credentials (user:password@)",
				"test.yaml:10: auth.issuers[1].jwks_url: must be an absolute https URL",
				"test.yaml:12: auth.issuers[2].issuer_url: must not have a query or fragment",
				`test.yaml:16: auth.issuers[3].name: duplicate issuer name "c" (also auth.issuers[2])`,
				"test.yaml:17: auth.issuers[3].issuer_url: must not have a query or fragment",
				"test.yaml:24: auth.issuers[4].jwks_url: must be https (http is accepted only on a loopback host: 127.0.0.0/8, ::1 or localhost)",
				"test.yaml:30: auth.issuers[6].issuer_url: duplicate issuer_url (also auth.issuers[4])",
				"test.yaml:36: auth.issuers[7].issuer_url: must be an absolute https URL",
				"test.yaml:37: auth.issuers[8].issuer_url: is required",
			},
		},
		{
			name: "issuer tenants",
			yaml: "auth:\n  issuers:\n" +
				"    - name: a\n      issuer_url: https://a\n      audiences: [x]\n" + // 3-5
				"    - name: b\n      issuer_url: https://b\n      audiences: [x]\n      tenant_claim: t\n      tenant: acme\n" + // 6-10
				"    - name: c\n      issuer_url: https://c\n      audiences: [x]\n      tenant: nope\n" + // 11-14
				"    - name: d\n      issuer_url: https://d\n      audiences: [x]\n      tenant_claim: org..tenant\n" + // 15-18
				"    - name: e\n      issuer_url: https://e\n      audiences: [x]\n      tenant_claim: .tenant\n" + // 19-22
				"    - name: f\n      issuer_url: https://f\n      audiences: [x]\n      tenant_claim: org.tenant.id\n" + // 23-26
				tenant,
			want: []string{
				"test.yaml:3: auth.issuers[0].tenant_claim: is required unless tenant is set: set tenant_claim to the claim holding the tenant id, or tenant to put every token in one tenant",
				"test.yaml:10: auth.issuers[1].tenant: cannot be combined with tenant_claim: set exactly one",
				`test.yaml:14: auth.issuers[2].tenant: unknown tenant "nope": it must be listed in tenants`,
				`test.yaml:18: auth.issuers[3].tenant_claim: "org..tenant" is not a claim path: want claim names separated by single dots, such as "tenant" or "org.tenant"`,
				`test.yaml:22: auth.issuers[4].tenant_claim: ".tenant" is not a claim path: want claim names separated by single dots, such as "tenant" or "org.tenant"`,
			},
		},
		{
			name: "audiences",
			yaml: "auth:\n  issuers:\n" +
				"    - name: a\n      issuer_url: https://a\n      tenant: acme\n" + // 3-5
				"    - name: b\n      issuer_url: https://b\n      tenant: acme\n      audiences: [\"\", x]\n" + // 6-9
				"    - name: c\n      issuer_url: https://c\n      tenant: acme\n      audiences: []\n" + // 10-13
				tenant,
			want: []string{
				"test.yaml:9: auth.issuers[1].audiences[0]: must not be empty",
			},
		},
		{
			name: "algorithms",
			yaml: "auth:\n  issuers:\n    - name: a\n      issuer_url: https://a\n      tenant: acme\n      audiences: [x]\n" +
				"      algorithms:\n        - RS256\n        - HS256\n        - none\n        - RS512\n        - hs384\n        - NONE\n        - es256\n        - [x]\n" + // 7-15
				tenant,
			want: []string{
				`test.yaml:9: auth.issuers[0].algorithms[1]: HMAC algorithms are not accepted: a resource server must verify with public keys (got "HS256")`,
				`test.yaml:10: auth.issuers[0].algorithms[2]: "none" is not accepted: tokens must be signed`,
				`test.yaml:11: auth.issuers[0].algorithms[3]: unknown algorithm "RS512": want one of RS256, PS256, ES256, EdDSA`,
				`test.yaml:12: auth.issuers[0].algorithms[4]: HMAC algorithms are not accepted: a resource server must verify with public keys (got "hs384")`,
				`test.yaml:13: auth.issuers[0].algorithms[5]: "NONE" is not accepted: tokens must be signed`,
				`test.yaml:14: auth.issuers[0].algorithms[6]: unknown algorithm "es256": want one of RS256, PS256, ES256, EdDSA`,
				"test.yaml:15: auth.issuers[0].algorithms[7]: must be a string",
			},
		},
		{
			name: "settings",
			yaml: "auth:\n  anonymous: true\n  required_scopes: [\"mcp read\", \"\", \"a\\\"b\", \"é\", ok]\n  leeway: 0s\n  token_cache_size: -1\n  issuer: x\n",
			want: []string{
				`test.yaml:3: auth.required_scopes[0]: "mcp read" must not contain spaces: list each scope separately`,
				"test.yaml:3: auth.required_scopes[1]: must not be empty",
				`test.yaml:3: auth.required_scopes[2]: "a\"b" is not a valid scope: want printable ASCII without spaces, '"' or '\'`,
				`test.yaml:3: auth.required_scopes[3]: "é" is not a valid scope: want printable ASCII without spaces, '"' or '\'`,
				"test.yaml:4: auth.leeway: must be positive",
				"test.yaml:5: auth.token_cache_size: must be positive",
				"test.yaml:6: auth.issuer: unknown key (want one of anonymous, issuers, leeway, required_scopes, token_cache_size)",
			},
		},
		{
			name: "shapes",
			yaml: "auth:\n  issuers:\n    - name: a\n      issuer_url: https://a\n      tenant: acme\n      audiences: x\n      tenant_id: t\n    - ~\n    - [a]\n" + tenant,
			want: []string{
				"test.yaml:6: auth.issuers[0].audiences: must be a list",
				"test.yaml:7: auth.issuers[0].tenant_id: unknown key (want one of algorithms, audiences, issuer_url, jwks_url, name, require_at_jwt, tenant, tenant_claim)",
				"test.yaml:8: auth.issuers[1]: must be a mapping",
				"test.yaml:9: auth.issuers[2]: must be a mapping",
			},
		},
		{
			name: "auth not a mapping",
			yaml: "auth: anonymous\n",
			want: []string{"test.yaml:1: auth: must be a mapping"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			y := tt.yaml
			if strings.Contains(y, "issuers:") && !strings.Contains(y, "server:") {
				// Issuers need a public URL; appended, it moves no line.
				y += "server:\n  public_url: https://mcp.example.com/mcp\n"
			}
			c, err := Parse("test.yaml", []byte(y), env(nil))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error; got %v", c)
			}
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseTenantProblems(t *testing.T) {
	// base is lines 1-9; tests append tenants from line 10.
	const base = "upstreams:\n  - name: github\n    url: http://gh/mcp\n  - name: search\n    url: http://s/mcp\n" +
		anon + "tenants:\n  - id: default\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "ids",
			yaml: "  - id: \"\"\n  - id: \"a b\"\n  - id: default\n  - upstreams: []\n  - id: x/y\n",
			want: []string{
				"test.yaml:10: tenants[1].id: is required",
				`test.yaml:11: tenants[2].id: "a b" must contain only A-Z, a-z, 0-9, ".", "_" and "-"`,
				`test.yaml:12: tenants[3].id: duplicate tenant id "default" (also tenants[0])`,
				"test.yaml:13: tenants[4].id: is required",
				`test.yaml:14: tenants[5].id: "x/y" must contain only A-Z, a-z, 0-9, ".", "_" and "-"`,
			},
		},
		{
			name: "upstream names",
			yaml: "  - id: t\n    upstreams:\n      - name: gitlab\n      - name: github\n      - name: github\n      - tools: {}\n      - ~\n      - name: search\n",
			want: []string{
				`test.yaml:12: tenants[1].upstreams[0].name: unknown upstream "gitlab"`,
				`test.yaml:14: tenants[1].upstreams[2].name: upstream "github" is already listed (tenants[1].upstreams[1])`,
				"test.yaml:15: tenants[1].upstreams[3].name: is required",
				"test.yaml:16: tenants[1].upstreams[4]: must be a mapping",
			},
		},
		{
			name: "upstreams without a value",
			yaml: "  - id: t\n    upstreams:\n  - id: u\n    upstreams: ~\n",
			want: []string{
				"test.yaml:11: tenants[1].upstreams: has no value: leave the key out for every upstream, or write [] for none",
				"test.yaml:13: tenants[2].upstreams: has no value: leave the key out for every upstream, or write [] for none",
			},
		},
		{
			name: "shapes",
			yaml: "  - id: t\n    upstreams: github\n    rules: {}\n  - just-a-name\n",
			want: []string{
				"test.yaml:11: tenants[1].upstreams: must be a list",
				"test.yaml:12: tenants[1].rules: unknown key (want one of budgets, guards, id, policy, tool_search, upstreams)",
				"test.yaml:13: tenants[2]: must be a mapping",
			},
		},
		{
			name: "rules",
			yaml: "  - id: t\n    upstreams:\n      - name: github\n" + // 10-12
				"        tools: {allow: [\"\", \"[a-\", \"ok_*\"], deny: [\"a\\\\\", [x]]}\n" + // 13
				"        prompts:\n          allow:\n          deny: x\n" + // 14-16
				"        resources: [\"*\"]\n" + // 17
				"        policies: {}\n" + // 18
				"      - name: search\n        tools: {allow: [a], except: [b]}\n", // 19-20
			want: []string{
				"test.yaml:13: tenants[1].upstreams[0].tools.allow[0]: must not be empty",
				`test.yaml:13: tenants[1].upstreams[0].tools.allow[1]: "[a-" is not a valid glob pattern (path.Match syntax: "*", "?", "[a-z]", "\" escapes)`,
				`test.yaml:13: tenants[1].upstreams[0].tools.deny[0]: "a\\" is not a valid glob pattern (path.Match syntax: "*", "?", "[a-z]", "\" escapes)`,
				"test.yaml:13: tenants[1].upstreams[0].tools.deny[1]: must be a string",
				"test.yaml:15: tenants[1].upstreams[0].prompts.allow: has no value: leave the key out to allow everything, or write [] to allow nothing",
				"test.yaml:16: tenants[1].upstreams[0].prompts.deny: must be a list",
				"test.yaml:17: tenants[1].upstreams[0].resources: must be a mapping",
				"test.yaml:18: tenants[1].upstreams[0].policies: unknown key (want one of annotations, auth, env, guards, headers, name, policy, present, prompts, required_scopes, resources, tools)",
				"test.yaml:20: tenants[1].upstreams[1].tools.except: unknown key (want one of allow, deny)",
			},
		},
		{
			name: "required scopes",
			yaml: "  - id: t\n    upstreams:\n      - name: github\n        required_scopes:\n" + // 10-13
				"          a: [\"x y\", \"\"]\n" + // 14
				"          b: []\n" + // 15
				"          c:\n" + // 16
				"          d: x\n" + // 17
				"          \"\": [x]\n" + // 18
				"          a: [z]\n" + // 19
				"          \"x.y\": [\"a\\\"\"]\n" + // 20
				"      - name: search\n        required_scopes: [a]\n", // 21-22
			want: []string{
				`test.yaml:14: tenants[1].upstreams[0].required_scopes.a[0]: "x y" must not contain spaces: list each scope separately`,
				"test.yaml:14: tenants[1].upstreams[0].required_scopes.a[1]: must not be empty",
				"test.yaml:15: tenants[1].upstreams[0].required_scopes.b: must list at least one scope",
				"test.yaml:16: tenants[1].upstreams[0].required_scopes.c: must list at least one scope",
				"test.yaml:17: tenants[1].upstreams[0].required_scopes.d: must be a list",
				`test.yaml:18: tenants[1].upstreams[0].required_scopes[""]: tool name must not be empty`,
				"test.yaml:19: tenants[1].upstreams[0].required_scopes.a: duplicate key (first defined at line 14)",
				`test.yaml:20: tenants[1].upstreams[0].required_scopes["x.y"][0]: "a\"" is not a valid scope: want printable ASCII without spaces, '"' or '\'`,
				"test.yaml:22: tenants[1].upstreams[1].required_scopes: must be a mapping",
			},
		},
		{
			name: "annotations",
			yaml: "  - id: t\n    upstreams:\n      - name: github\n        annotations:\n" + // 10-13
				"          a: {readOnlyHint: \"true\", destructiveHint: yes, idempotentHint: 1, openWorldHint: [true]}\n" + // 14
				"          b: {title: [x], readonlyHint: true}\n" + // 15
				"          \"\": {}\n" + // 16
				"          c: true\n" + // 17
				"          b: {}\n" + // 18
				"      - name: search\n        annotations: [a]\n", // 19-20
			want: []string{
				`test.yaml:14: tenants[1].upstreams[0].annotations.a.readOnlyHint: must be true or false, got "true"`,
				`test.yaml:14: tenants[1].upstreams[0].annotations.a.destructiveHint: must be true or false, got "yes"`,
				`test.yaml:14: tenants[1].upstreams[0].annotations.a.idempotentHint: must be true or false, got "1"`,
				`test.yaml:14: tenants[1].upstreams[0].annotations.a.openWorldHint: must be true or false`,
				"test.yaml:15: tenants[1].upstreams[0].annotations.b.title: must be a string",
				"test.yaml:15: tenants[1].upstreams[0].annotations.b.readonlyHint: unknown key (want one of destructiveHint, idempotentHint, openWorldHint, readOnlyHint, title)",
				`test.yaml:16: tenants[1].upstreams[0].annotations[""]: tool name must not be empty`,
				"test.yaml:17: tenants[1].upstreams[0].annotations.c: must be a mapping",
				"test.yaml:18: tenants[1].upstreams[0].annotations.b: duplicate key (first defined at line 15)",
				"test.yaml:20: tenants[1].upstreams[1].annotations: must be a mapping",
			},
		},
		{
			name: "tenants not a list",
			yaml: "    upstreams: []\ntenants2: {}\n",
			want: []string{"test.yaml:11: tenants2: unknown key (want one of admin, auth, budgets, identity, limits, pins, policy, server, sessions, telemetry, tenants, upstreams, vault)"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(base+tt.yaml), env(nil))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error; got %v", c)
			}
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRedisProblems(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "redis store",
			yaml: "sessions:\n  store: redis\n  redis:\n" +
				`    addrs: ["a", ":6379", "h:0", "redis://:pw@h:6379", "h:6379", "h:x"]` + "\n" + // 4
				"    db: -1\n    key_prefix: \"\"\n    timeout: 0s\n    tls: \"yes\"\n    password: ${NOPE}\n    sentinel: x\n    db: 1.5\n", // 5-11
			want: []string{
				`test.yaml:4: sessions.redis.addrs[0]: invalid address "a": want host:port, such as "127.0.0.1:6379"`,
				`test.yaml:4: sessions.redis.addrs[1]: invalid address ":6379": want host:port, such as "127.0.0.1:6379"`,
				`test.yaml:4: sessions.redis.addrs[2]: invalid port in "h:0": want a number from 1 to 65535`,
				"test.yaml:4: sessions.redis.addrs[3]: must be host:port, not a URL (put a password in sessions.redis.password)",
				`test.yaml:4: sessions.redis.addrs[5]: invalid port in "h:x": want a number from 1 to 65535`,
				"test.yaml:5: sessions.redis.db: must not be negative",
				`test.yaml:6: sessions.redis.key_prefix: must not be empty (leave the key out for the default "mcpgw:")`,
				"test.yaml:7: sessions.redis.timeout: must be positive",
				`test.yaml:8: sessions.redis.tls: must be true or false, got "yes"`,
				"test.yaml:9: sessions.redis.password: environment variable NOPE is not set",
				"test.yaml:10: sessions.redis.sentinel: unknown key (want one of addrs, db, key_prefix, master_name, password, timeout, tls, username)",
				"test.yaml:11: sessions.redis.db: duplicate key (first defined at line 5)",
			},
		},
		{
			// The section is checked even while the memory store is used.
			name: "memory store",
			yaml: "sessions:\n  redis:\n    addrs: [nope]\n",
			want: []string{`test.yaml:3: sessions.redis.addrs[0]: invalid address "nope": want host:port, such as "127.0.0.1:6379"`},
		},
		{
			name: "not a mapping",
			yaml: "sessions:\n  redis: 127.0.0.1:6379\n",
			want: []string{"test.yaml:2: sessions.redis: must be a mapping"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(tt.yaml+anon), env(nil))
			if err == nil {
				t.Fatalf("Parse succeeded, want an error; got %v", c)
			}
			if diff := cmp.Diff(tt.want, problemLines(t, err)); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseRedisSentinelSingleAddr(t *testing.T) {
	yaml := "sessions:\n  store: redis\n  redis:\n    master_name: m\n    addrs: [\"sentinel:26379\"]\n    db: 0\n" + anon
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Redis{MasterName: "m", Addrs: []string{"sentinel:26379"}, KeyPrefix: "mcpgw:", Timeout: Duration(500 * time.Millisecond)}
	if diff := cmp.Diff(want, c.Sessions.Redis); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestWarnings(t *testing.T) {
	const yaml = `upstreams:
  - name: github
    url: http://gh/mcp
auth:
  anonymous: true
tenants:
  - id: default
    upstreams:
      - name: github
        tools:
          allow: ["get_*", "delete_repo", "x", "repo://a/*"]
          deny: ["x", "delete_*"]
        prompts:
          allow: ["*", "p?"]
          deny: ["*"]
        resources:
          allow: ["repo://a/*", "[^a]", "*"]
          deny: ["*", "file:///*"]
        required_scopes:
          list_repos: [a]
          get_x: [b]
          delete_repo: [c]
        annotations:
          "a.b": {readOnlyHint: true}
          get_y: {readOnlyHint: true}
  - id: other
    upstreams:
      - name: github
        tools: {deny: ["drop_*"]}
        annotations: {drop_db: {}, list: {}}
        required_scopes: {list: [x]}
  - id: third
    upstreams: [{name: github, tools: {allow: []}, annotations: {x: {}}}]
sessions:
  redis: {addrs: ["r:6379"]}
`
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := []string{
		`test.yaml:11: tenants[0].upstreams[0].tools.allow[1]: pattern "delete_repo" can never match: deny pattern "delete_*" matches it`,
		`test.yaml:11: tenants[0].upstreams[0].tools.allow[2]: pattern "x" can never match: deny repeats it`,
		`test.yaml:11: tenants[0].upstreams[0].tools.allow[3]: pattern "repo://a/*" contains "/" but tool names have none: did you mean resources?`,
		`test.yaml:14: tenants[0].upstreams[0].prompts.allow[0]: pattern "*" can never match: deny "*" denies every name it matches`,
		`test.yaml:14: tenants[0].upstreams[0].prompts.allow[1]: pattern "p?" can never match: deny "*" denies every name it matches`,
		`test.yaml:17: tenants[0].upstreams[0].resources.allow[0]: pattern "repo://a/*" can never match: deny "*" denies every name it matches`,
		`test.yaml:17: tenants[0].upstreams[0].resources.allow[1]: pattern "[^a]" can never match: deny "*" denies every name it matches`,
		`test.yaml:17: tenants[0].upstreams[0].resources.allow[2]: pattern "*" can never match: deny "*" denies every name it matches`,
		`test.yaml:20: tenants[0].upstreams[0].required_scopes.list_repos: tool "list_repos" is not matched by any tools.allow pattern: this entry has no effect`,
		`test.yaml:22: tenants[0].upstreams[0].required_scopes.delete_repo: tool "delete_repo" is denied by tools.deny pattern "delete_*": this entry has no effect`,
		`test.yaml:24: tenants[0].upstreams[0].annotations["a.b"]: tool "a.b" is not matched by any tools.allow pattern: this entry has no effect`,
		`test.yaml:30: tenants[1].upstreams[0].annotations.drop_db: tool "drop_db" is denied by tools.deny pattern "drop_*": this entry has no effect`,
		`test.yaml:33: tenants[2].upstreams[0].annotations.x: tool "x" is not matched by any tools.allow pattern: this entry has no effect`,
		`test.yaml:35: sessions.redis: is ignored: sessions.store is not "redis"`,
	}
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Error())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
	// Validate finds the same warnings but the last one (which needs the
	// file), without lines and in another order.
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	var gotValidate []string
	for _, w := range c.Warnings {
		gotValidate = append(gotValidate, w.Error())
	}
	wantValidate := make([]string, len(want)-1)
	for i, w := range want[:len(want)-1] {
		_, rest, _ := strings.Cut(w, ": ")
		wantValidate[i] = "test.yaml: " + rest
	}
	slices.Sort(gotValidate)
	slices.Sort(wantValidate)
	if diff := cmp.Diff(wantValidate, gotValidate); diff != "" {
		t.Errorf("Validate warnings mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateWarnings(t *testing.T) {
	c := &Config{
		Upstreams: []Upstream{{Name: "a", URL: "http://a/mcp"}},
		Auth:      Auth{Anonymous: true},
		Tenants: []Tenant{{ID: "default", Upstreams: []TenantUpstream{{
			Name:           "a",
			Tools:          Rules{Allow: []string{"get_*", "x"}, Deny: []string{"x"}},
			RequiredScopes: map[string][]string{"put": {"w"}},
		}}}},
		Warnings: []Problem{{Msg: "stale"}},
	}
	c.ApplyDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	want := []Problem{
		{Path: "tenants[0].upstreams[0].tools.allow[1]", Msg: `pattern "x" can never match: deny repeats it`},
		{Path: "tenants[0].upstreams[0].required_scopes.put", Msg: `tool "put" is not matched by any tools.allow pattern: this entry has no effect`},
	}
	if diff := cmp.Diff(want, c.Warnings); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}
}

func TestValidateAuthAndTenants(t *testing.T) {
	valid := func() *Config {
		return &Config{
			Server:    Server{PublicURL: "https://gw.example.com/mcp"},
			Upstreams: []Upstream{{Name: "a", URL: "http://a/mcp"}},
			Auth: Auth{Issuers: []Issuer{{
				Name: "corp", IssuerURL: "https://idp.example.com", TenantClaim: "tenant",
			}}},
			Tenants: []Tenant{{ID: "acme", Upstreams: []TenantUpstream{{Name: "a"}}}},
		}
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string
	}{
		{name: "valid, before defaults", modify: func(c *Config) {}},
		{name: "valid, after defaults", modify: func(c *Config) { c.ApplyDefaults() }},
		{name: "redis store", modify: func(c *Config) { c.Sessions.Store = StoreRedis; c.ApplyDefaults() }},
		{
			name:   "neither issuers nor anonymous",
			modify: func(c *Config) { c.Auth = Auth{} },
			want:   []string{"auth.issuers: at least one issuer is required (or set auth.anonymous: true for local development only)"},
		},
		{
			name:   "no audience without public_url",
			modify: func(c *Config) { c.Server.PublicURL = ""; c.ApplyDefaults() },
			want:   []string{"server.public_url: is required when auth.issuers are configured"},
		},
		{
			name:   "no tenants",
			modify: func(c *Config) { c.Tenants = nil },
			want:   []string{"tenants: at least one tenant is required when auth.issuers are configured"},
		},
		{
			name: "several problems",
			modify: func(c *Config) {
				c.Auth.Leeway = -1
				c.Auth.TokenCacheSize = -1
				c.Auth.Issuers[0].Algorithms = []string{"HS512"}
				c.Auth.Issuers = append(c.Auth.Issuers, Issuer{Name: "corp", IssuerURL: "https://idp.example.com", Tenant: "nope"})
				c.Tenants[0].Upstreams = append(c.Tenants[0].Upstreams, TenantUpstream{Name: "b", Tools: Rules{Deny: []string{"["}}})
				c.Tenants[0].Upstreams[0].RequiredScopes = map[string][]string{"t": nil}
				c.Tenants = append(c.Tenants, Tenant{ID: "acme"})
				c.Sessions.Redis = Redis{Addrs: []string{"x"}, DB: -1, Timeout: -1}
			},
			want: []string{
				`sessions.redis.addrs[0]: invalid address "x": want host:port, such as "127.0.0.1:6379"`,
				"sessions.redis.db: must not be negative",
				"sessions.redis.timeout: must be positive",
				"auth.leeway: must be positive",
				"auth.token_cache_size: must be positive",
				`auth.issuers[0].algorithms[0]: HMAC algorithms are not accepted: a resource server must verify with public keys (got "HS512")`,
				`auth.issuers[1].name: duplicate issuer name "corp" (also auth.issuers[0])`,
				"auth.issuers[1].issuer_url: duplicate issuer_url (also auth.issuers[0])",
				`auth.issuers[1].tenant: unknown tenant "nope": it must be listed in tenants`,
				"tenants[0].upstreams[0].required_scopes.t: must list at least one scope",
				`tenants[0].upstreams[1].name: unknown upstream "b"`,
				`tenants[0].upstreams[1].tools.deny[0]: "[" is not a valid glob pattern (path.Match syntax: "*", "?", "[a-z]", "\" escapes)`,
				`tenants[1].id: duplicate tenant id "acme" (also tenants[0])`,
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

func TestApplyDefaultsAuth(t *testing.T) {
	c := &Config{
		Server: Server{PublicURL: "https://gw.example.com/mcp"},
		Auth: Auth{Issuers: []Issuer{
			{Name: "a"},
			{Name: "b", Audiences: []string{"x"}, Algorithms: []string{"ES256"}},
			{Name: "c"},
		}},
	}
	c.ApplyDefaults()
	want := Auth{
		Issuers: []Issuer{
			{Name: "a", Audiences: []string{"https://gw.example.com/mcp"}, Algorithms: []string{"RS256", "PS256", "ES256", "EdDSA"}},
			{Name: "b", Audiences: []string{"x"}, Algorithms: []string{"ES256"}},
			{Name: "c", Audiences: []string{"https://gw.example.com/mcp"}, Algorithms: []string{"RS256", "PS256", "ES256", "EdDSA"}},
		},
		Leeway:         Duration(DefaultLeeway),
		TokenCacheSize: DefaultTokenCacheSize,
	}
	if diff := cmp.Diff(want, c.Auth); diff != "" {
		t.Errorf("Auth mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(defaultRedis, c.Sessions.Redis); diff != "" {
		t.Errorf("Redis mismatch (-want +got):\n%s", diff)
	}
	// Every issuer gets its own slices.
	c.Auth.Issuers[0].Algorithms[0] = "changed"
	c.Auth.Issuers[0].Audiences[0] = "changed"
	if c.Auth.Issuers[2].Algorithms[0] != "RS256" || c.Auth.Issuers[2].Audiences[0] != "https://gw.example.com/mcp" || DefaultAlgorithms()[0] != "RS256" {
		t.Error("issuers share their defaulted slices")
	}

	// Without public_url, audiences stay empty (and Validate reports them).
	c = &Config{Auth: Auth{Issuers: []Issuer{{Name: "a"}}}}
	c.ApplyDefaults()
	if got := c.Auth.Issuers[0].Audiences; got != nil {
		t.Errorf("Audiences = %q, want nil", got)
	}
}

func TestRedisSecretNeverLeaks(t *testing.T) {
	const secret = "s3cr3t-p4ss"
	vars := map[string]string{"REDIS_PW": secret}
	for _, tt := range []struct{ name, redis string }{
		{name: "unset variable next to a literal secret", redis: "password: " + secret + "${UNSET}"},
		{name: "unterminated reference", redis: "password: ${" + secret},
		{name: "secret as a variable name", redis: "password: ${" + secret + "}"},
		{name: "value is a list", redis: "password: [" + secret + "]"},
		{name: "value is a mapping", redis: "password: {" + secret + ": x}"},
		{name: "bad binary value", redis: "password: !!binary " + secret},
		{name: "syntax error", redis: "password: \"" + secret},
		{name: "password in addrs", redis: "addrs: [\"redis://:" + secret + "@h:6379\"]"},
		{name: "user and password in addrs", redis: "addrs: [\"u:" + secret + "@h:6379\"]"},
		{name: "password in an invalid addr", redis: "addrs: [\"" + secret + "@h\"]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "sessions:\n  store: redis\n  redis:\n    " + tt.redis + "\n" + anon
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
		c, err := Parse("test.yaml", []byte(fullYAML), env(vars))
		if err != nil {
			t.Fatalf("Parse: %v", err)
		}
		c.Upstreams[0].Headers = map[string]string{"Authorization": secret}
		if got := c.Sessions.Redis.Password; got != "pw-"+secret {
			t.Fatalf("Password = %q, want the expanded secret", got)
		}
		var logs bytes.Buffer
		slog.New(slog.NewJSONHandler(&logs, nil)).Info("loaded",
			"redis", c.Sessions.Redis, "redis_ptr", &c.Sessions.Redis, "sessions", c.Sessions, "config", c)
		slog.New(slog.NewTextHandler(&logs, nil)).Info("loaded",
			"redis", c.Sessions.Redis, "sessions", c.Sessions, "config", c)
		for _, s := range []string{
			fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c), fmt.Sprintf("%v", *c),
			fmt.Sprintf("%+v", *c), fmt.Sprintf("%#v", *c), fmt.Sprint(c.Sessions), fmt.Sprintf("%#v", c.Sessions),
			c.Sessions.Redis.String(), fmt.Sprintf("%q", c.Sessions.Redis), logs.String(),
		} {
			if strings.Contains(s, secret) {
				t.Errorf("output contains the secret:\n%s", s)
			}
			if !strings.Contains(s, "mymaster") {
				t.Errorf("output does not show the Redis settings:\n%s", s)
			}
		}
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		if s := string(data); strings.Contains(s, secret) || !strings.Contains(s, `"Password":"REDACTED"`) || !strings.Contains(s, `"Authorization":"REDACTED"`) {
			t.Errorf("JSON does not redact the secrets:\n%s", s)
		}
	})
}

// defaultTasks is sessions.tasks with every default applied.
var defaultTasks = Tasks{MaxPerPrincipal: 100, MaxPerTenant: 10000, MaxTasks: 100000, MaxTTL: Duration(time.Hour), ListPageSize: 50}

// defaultEvents are the defaults of sessions.events.
var defaultEvents = Events{PerStream: 1000, BytesPerStream: 1 << 20, TTL: Duration(2 * time.Minute),
	StreamsPerSession: 16, MaxStreams: 100_000, MaxBytes: 256 << 20,
	MaxStreamsPerPrincipal: 10_000, MaxStreamsPerTenant: 50_000, MaxBytesPerPrincipal: (256 << 20) / 10, MaxBytesPerTenant: 128 << 20}

// TestLoadForCheck: gateway validate checks a config without its secrets:
// an unset variable is a warning there (and an error to Load), while
// every other problem of a ${...} reference is still an error.
func TestLoadForCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unset := write("unset.yaml", "auth: {anonymous: true}\nupstreams:\n  - name: a\n    url: http://127.0.0.1:9/mcp\n    headers: {Authorization: \"Bearer ${NOT_SET_ANYWHERE}\"}\n")
	noenv := func(string) string { return "" }
	if _, err := Load(unset, noenv); err == nil || !strings.Contains(err.Error(), "NOT_SET_ANYWHERE is not set") {
		t.Errorf("Load: %v", err)
	}
	cfg, err := LoadForCheck(unset, noenv)
	if err != nil {
		t.Fatalf("LoadForCheck: %v", err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "unset.yaml:5") || !strings.Contains(cfg.Warnings[0].Error(), "NOT_SET_ANYWHERE") {
		t.Errorf("warnings %v", cfg.Warnings)
	}
	bad := write("bad.yaml", "auth: {anonymous: true}\nupstreams:\n  - name: a\n    url: http://127.0.0.1:9/mcp\n    headers: {Authorization: \"Bearer ${1BAD}\"}\n")
	if _, err := LoadForCheck(bad, noenv); err == nil {
		t.Error("a malformed reference passed LoadForCheck")
	}
}

// TestStdioCommandProblems: a command written as a string is one problem
// that says how to write it (not a missing url too), and a program that
// is not found is a warning (it may exist where the gateway runs).
func TestStdioCommandProblems(t *testing.T) {
	_, err := Parse("t.yaml", []byte("auth: {anonymous: true}\nupstreams:\n  - name: a\n    command: \"npx server\"\n"), nil)
	var ps Problems
	if !errors.As(err, &ps) || len(ps) != 1 || !strings.Contains(ps[0].Error(), `t.yaml:4: upstreams[0].command: must be a list`) {
		t.Errorf("string command: %v", err)
	}
	cfg, err := Parse("t.yaml", []byte("auth: {anonymous: true}\nupstreams:\n  - name: a\n    command: [\"no-such-program-anywhere\"]\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Error(), "not found here") {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}
