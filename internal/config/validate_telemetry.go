package config

import (
	"math"
	"net/url"
	"strings"
)

func (v *validator) telemetry(c *Config) {
	t := &c.Telemetry
	v.tracing("telemetry.tracing", &t.Tracing)
	v.auditOutput("telemetry.audit.output", t.Audit.Output)
	// Only a setting written in the file: a code-built config says what
	// it means.
	if _, ok := v.pos["telemetry.pprof"]; ok && t.Pprof && c.Server.AdminListen == "" {
		v.warnf("telemetry.pprof", "is ignored: server.admin_listen is not set")
	}
}

func (v *validator) tracing(path string, t *Tracing) {
	if r := t.SampleRatio; r != nil && (math.IsNaN(*r) || *r < 0 || *r > 1) {
		v.addf(path+".sample_ratio", "must be a number from 0 to 1, got %v", *r)
	}
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "":
			v.addf(path+".endpoint", `must be an absolute http or https URL, such as "http://collector:4318"`)
		case u.User != nil:
			v.addf(path+".endpoint", "must not contain credentials (user:password@); set OTEL_EXPORTER_OTLP_HEADERS instead")
		case strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/v1/traces"):
			v.warnf(path+".endpoint", "ends in /v1/traces, which the gateway appends itself: write the collector's base URL")
		}
	}
	if _, ok := v.pos[path]; ok && !t.Enabled && (t.Endpoint != "" || t.SampleRatio != nil) {
		v.warnf(path, "is ignored: %s.enabled is not true", path)
	}
}

// auditOutput checks telemetry.audit.output: a named stream, "off", or a
// file path. The file itself is not looked at: validate may run on
// another machine than serve.
func (v *validator) auditOutput(path, out string) {
	switch out {
	case "", AuditStderr, AuditStdout, AuditOff:
		return
	}
	switch {
	case strings.ContainsRune(out, 0):
		v.addf(path, "must be %q, %q, %q or a file path, and a path cannot contain NUL", AuditStderr, AuditStdout, AuditOff)
	case strings.HasSuffix(out, "/"):
		v.addf(path, "%q names a directory: want a file path, or %q, %q or %q", out, AuditStderr, AuditStdout, AuditOff)
	case strings.EqualFold(out, AuditStderr) || strings.EqualFold(out, AuditStdout) || strings.EqualFold(out, AuditOff):
		v.addf(path, "%q would be a file of that name: write %q", out, strings.ToLower(out))
	}
}
