package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseStdioUpstream(t *testing.T) {
	yaml := `
upstreams:
  - name: fs
    command: [npx, -y, "@modelcontextprotocol/server-filesystem", /data]
    env:
      API_KEY: ${FS_KEY}
    working_dir: /tmp
    stdio:
      isolation: session
      max_processes: 3
      idle_timeout: 1m
  - name: old
    url: http://old/sse
    transport: sse
tenants:
  - id: default
    upstreams:
      - name: fs
        env:
          API_KEY: ${ACME_KEY}
` + anon
	got, err := Parse("test.yaml", []byte(yaml), env(map[string]string{"FS_KEY": "k-default", "ACME_KEY": "k-acme"}))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	fs := got.Upstreams[0]
	want := Upstream{
		Name: "fs", Command: []string{"npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"},
		Env: map[string]string{"API_KEY": "k-default"}, WorkingDir: "/tmp",
		Stdio:   &UpstreamStdio{Isolation: IsolationSession, MaxProcesses: 3, IdleTimeout: Duration(time.Minute), StopGrace: Duration(DefaultStopGrace)},
		Timeout: Duration(DefaultUpstreamTimeout), AuditArguments: "none",
	}
	if diff := cmp.Diff(want, fs, cmp.AllowUnexported(UpstreamTLS{})); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
	if !fs.IsStdio() || fs.Watches() {
		t.Errorf("IsStdio = %v, Watches = %v; want true, false", fs.IsStdio(), fs.Watches())
	}
	if got.Upstreams[1].IsStdio() || got.Upstreams[1].Stdio != nil {
		t.Errorf("sse upstream taken for stdio")
	}
	if e := got.Tenants[0].Upstreams[0].Env["API_KEY"]; e != "k-acme" {
		t.Errorf("tenant env = %q", e)
	}
	for _, s := range []string{fs.String(), got.Tenants[0].Upstreams[0].String()} {
		if strings.Contains(s, "k-default") || strings.Contains(s, "k-acme") {
			t.Errorf("secret printed: %s", s)
		}
	}
	if b, _ := fs.MarshalJSON(); strings.Contains(string(b), "k-default") {
		t.Errorf("secret in JSON: %s", b)
	}
}

func TestParseStdioProblems(t *testing.T) {
	yaml := `
upstreams:
  - name: a
    transport: stdio
    url: http://a/mcp
    headers:
      X-Key: v
    env:
      1BAD: x
    stdio:
      isolation: pod
  - name: b
    url: http://b/mcp
    command: [x]
  - name: c
    transport: carrier-pigeon
    url: http://c/mcp
  - name: d
    command: [server]
    stdio:
      isolation: shared
tenants:
  - id: default
    upstreams:
      - name: d
        env:
          K: v
      - name: c
        env:
          K: v
      - name: b
        headers:
          X-Key: v
` + anon
	_, err := Parse("test.yaml", []byte(yaml), env(nil))
	got := problemLines(t, err)
	want := []string{
		"test.yaml:5: upstreams[0].url: must not be set for a stdio upstream (it runs command)",
		"test.yaml:3: upstreams[0].command: is required for a stdio upstream: the program and its arguments",
		"test.yaml:6: upstreams[0].headers: does not apply to a stdio upstream: give it credentials in env",
		"test.yaml:9: upstreams[0].env: variable name on this line is not valid: want letters, digits and underscores, not starting with a digit",
		`test.yaml:11: upstreams[0].stdio.isolation: unknown isolation "pod": must be "tenant", "shared" or "session"`,
		"test.yaml:13: upstreams[1].url: must not be set for a stdio upstream (it runs command)",
		`test.yaml:16: upstreams[2].transport: unknown transport "carrier-pigeon": must be "streamable_http", "sse", "auto", "stdio" or "openapi"`,
		`test.yaml:26: tenants[0].upstreams[0].env: cannot apply: upstream "d" runs one process for all tenants (stdio.isolation: shared)`,
		"test.yaml:29: tenants[0].upstreams[1].env: applies to stdio upstreams only",
		"test.yaml:32: tenants[0].upstreams[2].headers: does not apply to a stdio upstream: give the tenant's credentials in env",
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("sort", sortedStrings)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func sortedStrings(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}
