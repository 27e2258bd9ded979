package config

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseTelemetry(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want Telemetry
	}{
		{name: "absent", yaml: "", want: defaultTelemetry},
		{
			name: "tracing on",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    endpoint: https://otel.example.com:4318/otlp\n",
			want: Telemetry{
				Tracing: Tracing{Enabled: true, Endpoint: "https://otel.example.com:4318/otlp", SampleRatio: ptr(1.0)},
				Audit:   Audit{Output: "stderr"},
			},
		},
		{
			// An explicit 0 samples nothing; it is not "unset".
			name: "ratio zero",
			yaml: "telemetry:\n  tracing: {enabled: true, sample_ratio: 0}\n",
			want: Telemetry{Tracing: Tracing{Enabled: true, SampleRatio: ptr(0.0)}, Audit: Audit{Output: "stderr"}},
		},
		{
			name: "ratio one as an integer",
			yaml: "telemetry:\n  tracing: {enabled: true, sample_ratio: 1}\n",
			want: Telemetry{Tracing: Tracing{Enabled: true, SampleRatio: ptr(1.0)}, Audit: Audit{Output: "stderr"}},
		},
		{
			name: "ratio in exponent form",
			yaml: "telemetry:\n  tracing: {enabled: true, sample_ratio: 1e-2}\n",
			want: Telemetry{Tracing: Tracing{Enabled: true, SampleRatio: ptr(0.01)}, Audit: Audit{Output: "stderr"}},
		},
		{
			name: "ratio without leading zero",
			yaml: "telemetry:\n  tracing: {enabled: true, sample_ratio: .5}\n",
			want: Telemetry{Tracing: Tracing{Enabled: true, SampleRatio: ptr(0.5)}, Audit: Audit{Output: "stderr"}},
		},
		{name: "audit to stdout", yaml: "telemetry:\n  audit: {output: stdout}\n", want: Telemetry{Tracing: Tracing{SampleRatio: ptr(1.0)}, Audit: Audit{Output: "stdout"}}},
		{name: "audit off", yaml: "telemetry:\n  audit: {output: \"off\"}\n", want: Telemetry{Tracing: Tracing{SampleRatio: ptr(1.0)}, Audit: Audit{Output: "off"}}},
		{name: "audit to a file", yaml: "telemetry:\n  audit: {output: ./audit.log}\n", want: Telemetry{Tracing: Tracing{SampleRatio: ptr(1.0)}, Audit: Audit{Output: "./audit.log"}}},
		{
			name: "pprof with an admin listener",
			yaml: "server: {admin_listen: \"127.0.0.1:9090\"}\ntelemetry: {pprof: true}\n",
			want: Telemetry{Tracing: Tracing{SampleRatio: ptr(1.0)}, Audit: Audit{Output: "stderr"}, Pprof: true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(tt.yaml+anon), env(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, c.Telemetry); diff != "" {
				t.Errorf("mismatch (-want +got):\n%s", diff)
			}
			if c.Warnings != nil {
				t.Errorf("Warnings = %v, want none", c.Warnings)
			}
		})
	}
}

func TestParseAuditArguments(t *testing.T) {
	const yaml = `upstreams:
  - name: a
    url: http://a/mcp
  - name: b
    url: http://b/mcp
    audit_arguments: none
  - name: c
    url: http://c/mcp
    audit_arguments: hash
  - name: d
    url: http://d/mcp
    audit_arguments: redacted
` + anon
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	var got []string
	for _, u := range c.Upstreams {
		got = append(got, u.AuditArguments)
	}
	if diff := cmp.Diff([]string{"none", "none", "hash", "redacted"}, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

func TestParseTelemetryProblems(t *testing.T) {
	const up = "upstreams:\n  - name: up\n    url: http://up/mcp\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "unknown keys",
			yaml: "telemetry:\n  tracing:\n    enable: true\n  audit:\n    file: x\n  metrics: {}\n",
			want: []string{
				"test.yaml:3: telemetry.tracing.enable: unknown key (want one of enabled, endpoint, sample_ratio)",
				"test.yaml:5: telemetry.audit.file: unknown key (want one of output)",
				"test.yaml:6: telemetry.metrics: unknown key (want one of audit, pprof, tracing)",
			},
		},
		{
			name: "not mappings",
			yaml: "telemetry:\n  tracing: true\n  audit: stderr\n",
			want: []string{
				"test.yaml:2: telemetry.tracing: must be a mapping",
				"test.yaml:3: telemetry.audit: must be a mapping",
			},
		},
		{
			name: "telemetry not a mapping",
			yaml: "telemetry: [tracing]\n",
			want: []string{"test.yaml:1: telemetry: must be a mapping"},
		},
		{
			name: "bad booleans",
			yaml: "telemetry:\n  tracing:\n    enabled: \"true\"\n  pprof: yes\n",
			want: []string{
				`test.yaml:3: telemetry.tracing.enabled: must be true or false, got "true"`,
				`test.yaml:4: telemetry.pprof: must be true or false, got "yes"`,
			},
		},
		{
			name: "sample ratio out of range",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    sample_ratio: 1.5\n",
			want: []string{"test.yaml:4: telemetry.tracing.sample_ratio: must be a number from 0 to 1, got 1.5"},
		},
		{
			name: "negative sample ratio",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    sample_ratio: -0.1\n",
			want: []string{"test.yaml:4: telemetry.tracing.sample_ratio: must be a number from 0 to 1, got -0.1"},
		},
		{
			name: "sample ratio not a number",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    sample_ratio: half\n",
			want: []string{`test.yaml:4: telemetry.tracing.sample_ratio: must be a number from 0 to 1, got "half"`},
		},
		{
			name: "quoted sample ratio",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    sample_ratio: \"0.5\"\n",
			want: []string{`test.yaml:4: telemetry.tracing.sample_ratio: must be a number from 0 to 1, got "0.5"`},
		},
		{
			name: "sample ratio NaN",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    sample_ratio: .nan\n",
			want: []string{"test.yaml:4: telemetry.tracing.sample_ratio: must be a number from 0 to 1, got NaN"},
		},
		{
			name: "sample ratio list",
			yaml: "telemetry:\n  tracing:\n    sample_ratio: [1]\n",
			want: []string{"test.yaml:3: telemetry.tracing.sample_ratio: must be a number from 0 to 1"},
		},
		{
			name: "bad endpoints",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    endpoint: collector:4318\n",
			want: []string{`test.yaml:4: telemetry.tracing.endpoint: must be an absolute http or https URL, such as "http://collector:4318"`},
		},
		{
			name: "endpoint with grpc scheme",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    endpoint: grpc://collector:4317\n",
			want: []string{`test.yaml:4: telemetry.tracing.endpoint: must be an absolute http or https URL, such as "http://collector:4318"`},
		},
		{
			name: "endpoint with credentials",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    endpoint: https://user:s3cret@collector:4318\n",
			want: []string{"test.yaml:4: telemetry.tracing.endpoint: must not contain credentials (user:password@); set OTEL_EXPORTER_OTLP_HEADERS instead"},
		},
		{
			name: "empty audit output",
			yaml: "telemetry:\n  audit:\n    output: \"\"\n",
			want: []string{`test.yaml:3: telemetry.audit.output: must not be empty (leave the key out for "stderr", or write "off")`},
		},
		{
			name: "audit output is a directory",
			yaml: "telemetry:\n  audit:\n    output: /var/log/\n",
			want: []string{`test.yaml:3: telemetry.audit.output: "/var/log/" names a directory: want a file path, or "stderr", "stdout" or "off"`},
		},
		{
			name: "audit output in capitals",
			yaml: "telemetry:\n  audit:\n    output: STDERR\n",
			want: []string{`test.yaml:3: telemetry.audit.output: "STDERR" would be a file of that name: write "stderr"`},
		},
		{
			name: "audit output not a string",
			yaml: "telemetry:\n  audit:\n    output: [stderr]\n",
			want: []string{"test.yaml:3: telemetry.audit.output: must be a string"},
		},
		{
			name: "audit output with NUL",
			yaml: "telemetry:\n  audit:\n    output: \"a\\0b\"\n",
			want: []string{`test.yaml:3: telemetry.audit.output: must be "stderr", "stdout", "off" or a file path, and a path cannot contain NUL`},
		},
		{
			name: "unknown audit_arguments",
			yaml: up + "    audit_arguments: full\n  - name: b\n    url: http://b/mcp\n    audit_arguments: Hash\n",
			want: []string{
				`test.yaml:4: upstreams[0].audit_arguments: unknown mode "full": must be "none", "hash" or "redacted"`,
				`test.yaml:7: upstreams[1].audit_arguments: unknown mode "Hash": must be "none", "hash" or "redacted"`,
			},
		},
		{
			name: "audit_arguments not a string",
			yaml: up + "    audit_arguments: {mode: hash}\n",
			want: []string{"test.yaml:4: upstreams[0].audit_arguments: must be a string"},
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

func TestTelemetryWarnings(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{
			name: "tracing settings while disabled",
			yaml: "telemetry:\n  tracing:\n    endpoint: http://collector:4318\n",
			want: []string{"test.yaml:2: telemetry.tracing: is ignored: telemetry.tracing.enabled is not true"},
		},
		{
			name: "sample ratio while disabled",
			yaml: "telemetry:\n  tracing:\n    enabled: false\n    sample_ratio: 0.5\n",
			want: []string{"test.yaml:2: telemetry.tracing: is ignored: telemetry.tracing.enabled is not true"},
		},
		{
			name: "disabled without settings",
			yaml: "telemetry:\n  tracing:\n    enabled: false\n",
		},
		{
			name: "endpoint with the signal path",
			yaml: "telemetry:\n  tracing:\n    enabled: true\n    endpoint: http://collector:4318/v1/traces/\n",
			want: []string{"test.yaml:4: telemetry.tracing.endpoint: ends in /v1/traces, which the gateway appends itself: write the collector's base URL"},
		},
		{
			name: "pprof without an admin listener",
			yaml: "telemetry:\n  pprof: true\n",
			want: []string{"test.yaml:2: telemetry.pprof: is ignored: server.admin_listen is not set"},
		},
		{
			name: "pprof off without an admin listener",
			yaml: "telemetry:\n  pprof: false\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(tt.yaml+anon), env(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			var got []string
			for _, w := range c.Warnings {
				got = append(got, w.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("warnings mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateTelemetry(t *testing.T) {
	valid := func() *Config {
		return &Config{
			Upstreams: []Upstream{{Name: "a", URL: "http://a/mcp"}},
			Auth:      Auth{Anonymous: true},
		}
	}
	tests := []struct {
		name   string
		modify func(c *Config)
		want   []string
	}{
		{name: "zero values", modify: func(c *Config) {}},
		{name: "after defaults", modify: func(c *Config) { c.ApplyDefaults() }},
		{
			name: "every setting",
			modify: func(c *Config) {
				c.Telemetry = Telemetry{
					Tracing: Tracing{Enabled: true, Endpoint: "http://127.0.0.1:4318", SampleRatio: ptr(0.0)},
					Audit:   Audit{Output: "/tmp/audit.log"},
					Pprof:   true,
				}
				c.Upstreams[0].AuditArguments = AuditArgumentsRedacted
			},
		},
		{
			name: "problems",
			modify: func(c *Config) {
				c.Telemetry = Telemetry{
					Tracing: Tracing{Enabled: true, Endpoint: "/v1/traces", SampleRatio: ptr(math.Inf(1))},
					Audit:   Audit{Output: "logs/"},
				}
				c.Upstreams[0].AuditArguments = "all"
			},
			want: []string{
				`upstreams[0].audit_arguments: unknown mode "all": must be "none", "hash" or "redacted"`,
				"telemetry.tracing.sample_ratio: must be a number from 0 to 1, got +Inf",
				`telemetry.tracing.endpoint: must be an absolute http or https URL, such as "http://collector:4318"`,
				`telemetry.audit.output: "logs/" names a directory: want a file path, or "stderr", "stdout" or "off"`,
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
			// A code-built config has no file, so the file-only warnings
			// (pprof without admin_listen) do not apply.
			if c.Warnings != nil {
				t.Errorf("Warnings = %v, want none", c.Warnings)
			}
		})
	}
}

func TestApplyDefaultsTelemetry(t *testing.T) {
	c := &Config{
		Upstreams: []Upstream{{AuditArguments: AuditArgumentsHash}, {}},
		Telemetry: Telemetry{Tracing: Tracing{SampleRatio: ptr(0.0)}, Audit: Audit{Output: AuditOff}},
	}
	c.ApplyDefaults()
	want := Telemetry{Tracing: Tracing{SampleRatio: ptr(0.0)}, Audit: Audit{Output: "off"}}
	if diff := cmp.Diff(want, c.Telemetry); diff != "" {
		t.Errorf("Telemetry mismatch (-want +got):\n%s", diff)
	}
	if got := []string{c.Upstreams[0].AuditArguments, c.Upstreams[1].AuditArguments}; !cmp.Equal(got, []string{"hash", "none"}) {
		t.Errorf("AuditArguments = %q, want [hash none]", got)
	}

	// Each config gets its own default ratio, so that changing one does
	// not change another.
	a, b := &Config{}, &Config{}
	a.ApplyDefaults()
	b.ApplyDefaults()
	if a.Telemetry.Tracing.SampleRatio == b.Telemetry.Tracing.SampleRatio {
		t.Error("two configs share one SampleRatio pointer")
	}
}
