// Package docs holds no code: its tests keep the documentation true. They
// check docs/configuration.md against the config struct, docs/metrics.md
// against the registered metrics, the links of README.md and docs/, and
// that every command of the README's "Quick start" works as written.
package docs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/testkit"
)

// root is the repository root, relative to this package's directory (the
// working directory of its tests).
const root = "../.."

func readRepoFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ---------------------------------------------------------------------------
// Markdown helpers

// tableRow is one row of a Markdown table, its cells trimmed, with the
// first cell of the table's header.
type tableRow struct {
	header string // first header cell, lowercased
	cells  []string
	line   int
}

// tableRows returns the body rows of every pipe table in md.
func tableRows(md string) []tableRow {
	var rows []tableRow
	lines := strings.Split(md, "\n")
	header := ""
	inTable := false
	for i, line := range lines {
		l := strings.TrimSpace(line)
		if !strings.HasPrefix(l, "|") {
			inTable = false
			continue
		}
		cells := splitRow(l)
		if !inTable {
			// A header row is followed by a delimiter row.
			if i+1 < len(lines) && isDelimiterRow(strings.TrimSpace(lines[i+1])) {
				header = strings.ToLower(cells[0])
				inTable = true
			}
			continue
		}
		if isDelimiterRow(l) {
			continue
		}
		rows = append(rows, tableRow{header: header, cells: cells, line: i + 1})
	}
	return rows
}

var delimiterRE = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

func isDelimiterRow(l string) bool { return delimiterRE.MatchString(l) }

// splitRow splits "| a | b |" into ["a", "b"], ignoring "|" inside
// backticks.
func splitRow(l string) []string {
	l = strings.TrimPrefix(strings.TrimSuffix(l, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, r := range l {
		switch {
		case r == '`':
			code = !code
			cur.WriteRune(r)
		case r == '|' && !code:
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// codeSpans returns the contents of the backticked spans in s.
func codeSpans(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`([^`]*)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// section returns the text of the "## title" section of md, up to the next
// level-2 heading, or "" if there is none.
func section(md, title string) string {
	lines := strings.Split(md, "\n")
	var out []string
	in, fence := false, false
	for _, l := range lines {
		if strings.HasPrefix(l, "```") {
			fence = !fence
		}
		if !fence && strings.HasPrefix(l, "## ") {
			if in {
				break
			}
			in = strings.TrimSpace(strings.TrimPrefix(l, "## ")) == title
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// fencedBlocks returns the bodies of the fenced code blocks of md whose
// info string is lang.
func fencedBlocks(md, lang string) []string {
	var blocks, cur []string
	in, keep := false, false
	for _, l := range strings.Split(md, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case !in && strings.HasPrefix(t, "```"):
			in, keep, cur = true, strings.TrimSpace(t[3:]) == lang, nil
		case in && t == "```":
			in = false
			if keep {
				blocks = append(blocks, strings.Join(cur, "\n"))
			}
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// headingSlugs returns the GitHub anchors of md's headings.
func headingSlugs(md string) map[string]bool {
	slugs := map[string]bool{}
	seen := map[string]int{}
	fence := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.TrimSpace(strings.TrimLeft(l, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(h) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		s := b.String()
		if n := seen[s]; n > 0 {
			slugs[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			slugs[s] = true
		}
		seen[s]++
	}
	return slugs
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// relativeLinks returns the link targets of md that point into the
// repository (no scheme, not a bare anchor), outside code blocks and
// spans.
func relativeLinks(md string) []string {
	var out []string
	fence := false
	for _, l := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fence = !fence
			continue
		}
		if fence {
			continue
		}
		l = regexp.MustCompile("`[^`]*`").ReplaceAllString(l, "")
		for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			out = append(out, target)
		}
	}
	return out
}

// checkLinks checks that every relative link of the Markdown file name
// (repository-relative) resolves to a file or directory, and that an anchor
// into a Markdown file names one of its headings.
func checkLinks(t *testing.T, name string) {
	t.Helper()
	md := readRepoFile(t, name)
	for _, target := range relativeLinks(md) {
		path, anchor, _ := strings.Cut(target, "#")
		file := name
		if path != "" {
			file = filepath.ToSlash(filepath.Join(filepath.Dir(name), path))
			if strings.HasPrefix(file, "../") {
				t.Errorf("%s: link %q leaves the repository", name, target)
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
				t.Errorf("%s: link %q: %v", name, target, err)
				continue
			}
		}
		if anchor != "" && strings.HasSuffix(file, ".md") {
			if !headingSlugs(readRepoFile(t, file))[anchor] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", name, target, file, anchor)
			}
		}
	}
}

// ---------------------------------------------------------------------------
// docs/configuration.md

// A configKey is one key path of the YAML config, as the reference writes
// it: "server.listen", "upstreams[].headers",
// "tenants[].upstreams[].annotations.*.title" (a map key is "*").
type configKey struct {
	path string
	typ  string // "string", "int", "bool", "float", "duration", "[]string", "map[string]string", "mapping", "[]mapping", ...
	leaf bool
	def  reflect.Value // the value ApplyDefaults gives it; invalid when it gives none
}

var durationType = reflect.TypeFor[config.Duration]()

// yamlTypeName names t the way the reference's type column does.
func yamlTypeName(t reflect.Type) string {
	if t == durationType {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return yamlTypeName(t.Elem())
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64:
		return "int"
	case reflect.Float64:
		return "float"
	case reflect.Slice:
		return "[]" + yamlTypeName(t.Elem())
	case reflect.Map:
		return "map[" + yamlTypeName(t.Key()) + "]" + yamlTypeName(t.Elem())
	case reflect.Struct:
		return "mapping"
	}
	return t.String()
}

// configKeys walks the yaml tags of config.Config recursively. before is
// a sample config and after the same with defaults applied: a leaf that
// ApplyDefaults changed has its default in def.
func configKeys(before, after reflect.Value) []configKey {
	var keys []configKey
	var walk func(t reflect.Type, before, after reflect.Value, prefix string)
	walk = func(t reflect.Type, before, after reflect.Value, prefix string) {
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			path := prefix + name
			ft := f.Type
			var fb, fa reflect.Value
			if before.IsValid() && after.IsValid() {
				fb, fa = before.Field(i), after.Field(i)
			}
			k := configKey{path: path, typ: yamlTypeName(ft)}
			switch {
			case ft.Kind() == reflect.Struct && ft != durationType:
				keys = append(keys, k)
				walk(ft, fb, fa, path+".")
			case ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct:
				// An optional section: absent (nil) unless written.
				keys = append(keys, k)
				walk(ft.Elem(), reflect.Value{}, reflect.Value{}, path+".")
			case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
				keys = append(keys, k)
				var eb, ea reflect.Value
				if fb.IsValid() && fb.Len() > 0 && fa.Len() > 0 {
					eb, ea = fb.Index(0), fa.Index(0)
				}
				walk(ft.Elem(), eb, ea, path+"[].")
			case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
				keys = append(keys, k)
				walk(ft.Elem(), reflect.Value{}, reflect.Value{}, path+".*.")
			default:
				k.leaf = true
				if fa.IsValid() && !reflect.DeepEqual(fb.Interface(), fa.Interface()) {
					k.def = fa
				}
				keys = append(keys, k)
			}
		}
	}
	walk(before.Type(), before, after, "")
	return keys
}

// sampleConfig is a config with one item in every list, before defaults
// are applied.
func sampleConfig() *config.Config {
	return &config.Config{
		Server:    config.Server{PublicURL: "https://mcp.example.com/mcp"},
		Upstreams: []config.Upstream{{Name: "u", URL: "http://127.0.0.1:9001/mcp"}},
		Auth: config.Auth{Issuers: []config.Issuer{{
			Name: "i", IssuerURL: "https://idp.example.com", TenantClaim: "tenant",
		}}},
		Tenants: []config.Tenant{{ID: "t", Upstreams: []config.TenantUpstream{{Name: "u"}}}},
	}
}

// derivedDefaults are keys whose default is another key's value: the
// reference's default cell must name that key instead of a value.
var derivedDefaults = map[string]string{
	"auth.issuers[].audiences": "server.public_url",
}

// formatDefault formats a default value the way the reference writes it
// in backticks; ok is false for a zero value (no default to check).
func formatDefault(v reflect.Value) (string, bool) {
	if !v.IsValid() || v.IsZero() {
		return "", false
	}
	if v.Type() == durationType {
		return shortDuration(time.Duration(v.Int())), true
	}
	switch v.Kind() {
	case reflect.Pointer:
		return formatDefault(v.Elem())
	case reflect.String:
		return v.String(), true
	case reflect.Bool:
		return fmt.Sprint(v.Bool()), true
	case reflect.Int, reflect.Int64:
		return fmt.Sprint(v.Int()), true
	case reflect.Float64:
		return fmt.Sprint(v.Float()), true
	case reflect.Slice:
		if v.Len() == 0 {
			return "", false
		}
		var items []string
		for i := range v.Len() {
			s, _ := formatDefault(v.Index(i))
			items = append(items, s)
		}
		return "[" + strings.Join(items, ", ") + "]", true
	}
	return "", false
}

// shortDuration writes d as a config file would: "5m", not "5m0s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// restartKeys returns the settings a reload keeps (they need a restart),
// from the keepRestartOnly calls in internal/gateway/reload.go.
func restartKeys(t *testing.T) []string {
	t.Helper()
	src := readRepoFile(t, "internal/gateway/reload.go")
	var keys []string
	for _, m := range regexp.MustCompile(`\bkeep\("([a-z_.]+)"`).FindAllStringSubmatch(src, -1) {
		keys = append(keys, m[1])
	}
	if len(keys) == 0 {
		t.Fatal(`found no keep("...") call in internal/gateway/reload.go: update restartKeys to how reload.go names the settings that need a restart`)
	}
	return keys
}

func needsRestart(path string, restart []string) bool {
	for _, k := range restart {
		if path == k || strings.HasPrefix(path, k+".") || strings.HasPrefix(path, k+"[") {
			return true
		}
	}
	return false
}

var placeholderRE = regexp.MustCompile(`<[^>]+>`)

// TestConfigurationReference checks docs/configuration.md against
// config.Config: every key path of the YAML has a row in a table whose
// first column is "key", with the right type, the default ApplyDefaults
// gives, and whether a reload applies it (internal/gateway/reload.go); and
// every key the reference names exists.
func TestConfigurationReference(t *testing.T) {
	before, after := sampleConfig(), sampleConfig()
	after.ApplyDefaults()
	keys := configKeys(reflect.ValueOf(before).Elem(), reflect.ValueOf(after).Elem())
	byPath := map[string]configKey{}
	for _, k := range keys {
		byPath[k.path] = k
		if strings.HasPrefix(k.typ, "[]mapping") {
			byPath[k.path+"[]"] = k // "upstreams[]" names the list too
		}
	}
	restart := restartKeys(t)
	for _, k := range restart {
		if _, ok := byPath[k]; !ok {
			t.Errorf("internal/gateway/reload.go keeps %q on reload, which is not a config key path", k)
		}
	}

	md := readRepoFile(t, "docs/configuration.md")
	documented := map[string]bool{}
	for _, row := range tableRows(md) {
		if row.header != "key" {
			continue
		}
		if len(row.cells) < 5 {
			t.Errorf("docs/configuration.md:%d: want 5 columns (key, type, default, reload, meaning), got %d", row.line, len(row.cells))
			continue
		}
		spans := codeSpans(row.cells[0])
		if len(spans) != 1 {
			t.Errorf("docs/configuration.md:%d: the key cell must hold exactly one backticked key path, got %q", row.line, row.cells[0])
			continue
		}
		path := placeholderRE.ReplaceAllString(spans[0], "*")
		k, ok := byPath[path]
		if !ok {
			t.Errorf("docs/configuration.md:%d: %q is not a key of config.Config", row.line, spans[0])
			continue
		}
		if documented[path] {
			t.Errorf("docs/configuration.md:%d: %q is documented twice", row.line, spans[0])
		}
		documented[path] = true

		typ, def, reload := row.cells[1], row.cells[2], row.cells[3]
		if got := strings.Trim(typ, "`"); got != k.typ {
			t.Errorf("docs/configuration.md:%d: %s: type %q, want %q", row.line, spans[0], got, k.typ)
		}
		if k.leaf {
			if from, ok := derivedDefaults[k.path]; ok {
				if !strings.Contains(def, from) {
					t.Errorf("docs/configuration.md:%d: %s: the default should name %s, got %q", row.line, spans[0], from, def)
				}
			} else if want, ok := formatDefault(k.def); ok && !slices.Contains(codeSpans(def), want) {
				t.Errorf("docs/configuration.md:%d: %s: default %q, want it to hold `%s` (config.ApplyDefaults)", row.line, spans[0], def, want)
			}
		}
		want, other := "live", "restart"
		if needsRestart(k.path, restart) {
			want, other = other, want
		}
		if r := strings.ToLower(reload); !strings.Contains(r, want) || strings.Contains(r, other) {
			t.Errorf("docs/configuration.md:%d: %s: reload %q, want %q (internal/gateway/reload.go)", row.line, spans[0], reload, want)
		}
	}
	for _, k := range keys {
		if k.leaf && !documented[k.path] {
			t.Errorf("docs/configuration.md: key %s (%s) is not documented: add a row to a key table", k.path, k.typ)
		}
	}
}

// ---------------------------------------------------------------------------
// docs/metrics.md

// exerciseMetrics calls every method of m that records something, and
// returns their names.
func exerciseMetrics(m *telemetry.Metrics) []string {
	m.ObserveRequest("tools/call", "acme", telemetry.OutcomeOK, time.Millisecond)
	m.ObserveUpstream("github", "tools/call", telemetry.OutcomeOK, time.Millisecond)
	m.ToolCall("acme", "github", "create_issue", telemetry.OutcomeOK)
	m.AuthFailure("missing token")
	m.PolicyDenial("acme", "github", "tool")
	m.PolicyDecision("acme", telemetry.PolicyByRule, false)
	m.PDPRequest(false, time.Millisecond)
	m.PDPCacheHit()
	m.GuardFinding("acme", "github", "results", "email", "redact", 2)
	m.GuardWebhook(false, time.Millisecond)
	m.SessionStarted()
	m.SessionEnded()
	m.SetSessionsActiveFunc(func() int { return 1 })
	m.SSEStreamOpened()
	m.UpstreamStream(1)
	m.SSEStreamClosed()
	m.ConfigLoaded()
	m.ConfigReload(telemetry.ReloadOK)
	m.ConfigReload(telemetry.ReloadError)
	m.LimitRejection(telemetry.LimitSessionsPrincipal, "acme")
	m.NameFlagged("github", telemetry.NameControlCharacter)
	m.SchemaViolation("acme", "github", telemetry.SchemaInput)
	m.QuarantinedItems("github", "tool", 1)
	m.TokenFetch("github", "client_credentials", "ok")
	m.BudgetRefusal("rate_limit", "per-user", "acme")
	m.QuotaUsed("acme", "daily", 3)
	m.CircuitOpen("github", true)
	m.LogSuppressed("session store")
	m.UpstreamProcess("fs")(1, false)
	m.UpstreamProcess("fs")(-1, true)
	m.StreamResumed(telemetry.ResumeOK)
	m.CallDetached(1)
	return []string{
		"ObserveRequest", "ObserveUpstream", "ToolCall", "AuthFailure", "PolicyDenial", "PolicyDecision", "PDPRequest", "PDPCacheHit", "GuardFinding", "GuardWebhook",
		"SessionStarted", "SessionEnded", "SetSessionsActiveFunc", "SSEStreamOpened", "SSEStreamClosed", "UpstreamStream",
		"ConfigLoaded", "ConfigReload", "LimitRejection", "NameFlagged", "SchemaViolation", "QuarantinedItems", "TokenFetch", "LogSuppressed",
		"BudgetRefusal", "QuotaUsed", "CircuitOpen", "UpstreamProcess", "StreamResumed", "CallDetached",
		"Handler", "Gather", // serve, record nothing
	}
}

var metricNameRE = regexp.MustCompile(`\bmcpgw_[a-z0-9_]+`)

// TestMetricsReference checks docs/metrics.md against the metrics the
// gateway registers: every mcpgw_ metric, gathered from a registry after
// every recording method ran once (and every name in metrics.go's source),
// has a row with its type and labels; and every mcpgw_ name the page
// mentions exists.
func TestMetricsReference(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := telemetry.NewMetrics(reg)
	exercised := exerciseMetrics(m)
	mt := reflect.TypeOf(m)
	for i := range mt.NumMethod() {
		if name := mt.Method(i).Name; !slices.Contains(exercised, name) {
			t.Errorf("telemetry.Metrics has a method %s that this test does not call: add it to exerciseMetrics", name)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	type metric struct {
		typ    string
		labels []string
	}
	registered := map[string]metric{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), "mcpgw_") {
			continue
		}
		var labels []string
		if ms := f.GetMetric(); len(ms) > 0 {
			for _, l := range ms[0].GetLabel() {
				labels = append(labels, l.GetName())
			}
		}
		slices.Sort(labels)
		registered[f.GetName()] = metric{typ: strings.ToLower(f.GetType().String()), labels: labels}
	}
	// A metric defined in the source but never registered would not be
	// gathered: the source is the second witness.
	src := readRepoFile(t, "internal/telemetry/metrics.go")
	for _, m := range regexp.MustCompile(`Name:\s*"(mcpgw_[a-z0-9_]+)"`).FindAllStringSubmatch(src, -1) {
		if _, ok := registered[m[1]]; !ok {
			t.Errorf("internal/telemetry/metrics.go defines %s but the registry does not gather it", m[1])
			registered[m[1]] = metric{}
		}
	}
	if len(registered) == 0 {
		t.Fatal("no mcpgw_ metric gathered")
	}

	md := readRepoFile(t, "docs/metrics.md")
	documented := map[string]bool{}
	for _, row := range tableRows(md) {
		if row.header != "metric" {
			continue
		}
		if len(row.cells) < 4 {
			t.Errorf("docs/metrics.md:%d: want 4 columns (metric, type, labels, meaning), got %d", row.line, len(row.cells))
			continue
		}
		spans := codeSpans(row.cells[0])
		if len(spans) != 1 {
			t.Errorf("docs/metrics.md:%d: the metric cell must hold exactly one backticked name, got %q", row.line, row.cells[0])
			continue
		}
		name := spans[0]
		got, ok := registered[name]
		if !ok {
			if strings.HasPrefix(name, "mcpgw_") {
				t.Errorf("docs/metrics.md:%d: %s is not a registered metric", row.line, name)
			}
			continue
		}
		documented[name] = true
		if typ := strings.ToLower(strings.Trim(row.cells[1], "`")); got.typ != "" && typ != got.typ {
			t.Errorf("docs/metrics.md:%d: %s: type %q, want %q", row.line, name, typ, got.typ)
		}
		labels := codeSpans(row.cells[2])
		slices.Sort(labels)
		if got.typ != "" && !slices.Equal(labels, got.labels) {
			t.Errorf("docs/metrics.md:%d: %s: labels %v, want %v", row.line, name, labels, got.labels)
		}
	}
	for name := range registered {
		if !documented[name] {
			t.Errorf("docs/metrics.md: metric %s is not documented: add a row to the metric table", name)
		}
	}
	for _, name := range metricNameRE.FindAllString(md, -1) {
		base := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && registered[b].typ == "histogram" {
				base = b
			}
		}
		if _, ok := registered[base]; !ok {
			t.Errorf("docs/metrics.md mentions %s, which is not a registered metric", name)
		}
	}
}

// ---------------------------------------------------------------------------
// Links

// TestLinks checks that the relative links of README.md and of every page
// under docs/ resolve, and that README.md links every page under docs/.
func TestLinks(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	checkLinks(t, "README.md")
	readme := readRepoFile(t, "README.md")
	linked := map[string]bool{}
	for _, target := range relativeLinks(readme) {
		path, _, _ := strings.Cut(target, "#")
		linked[filepath.ToSlash(filepath.Clean(path))] = true
	}
	docsList := section(readme, "Documentation")
	if docsList == "" {
		t.Error(`README.md has no "## Documentation" section`)
	}
	for _, p := range pages {
		name := "docs/" + filepath.Base(p)
		checkLinks(t, name)
		if !linked[name] {
			t.Errorf("README.md does not link %s", name)
		}
		if !strings.Contains(docsList, "("+name+")") {
			t.Errorf(`README.md's "Documentation" section does not list %s`, name)
		}
	}
}

// ---------------------------------------------------------------------------
// README.md, "Quick start"

// shellCommands splits a sh block into commands: lines joined at a
// trailing backslash, comment-only and blank lines dropped.
func shellCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for _, l := range strings.Split(block, "\n") {
		if cur.Len() == 0 {
			t := strings.TrimSpace(l)
			if t == "" || strings.HasPrefix(t, "#") {
				continue
			}
		}
		if s, ok := strings.CutSuffix(l, "\\"); ok {
			cur.WriteString(s)
			cur.WriteString("\\\n")
			continue
		}
		cur.WriteString(l)
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	if cur.Len() > 0 {
		cmds = append(cmds, cur.String())
	}
	return cmds
}

var (
	demoCmdRE   = regexp.MustCompile(`^(?:go run \./cmd/gateway|make) (demo\b.*)$`)
	makeCmdRE   = regexp.MustCompile(`^make ([a-z][a-z0-9_-]*)$`)
	tokenLineRE = regexp.MustCompile(`(?m)^TOKEN=.*$`)
	urlRE       = regexp.MustCompile(`http://127\.0\.0\.1:8080/mcp`)
	assignRE    = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*)=`)
	printedEP   = regexp.MustCompile(`endpoint:\s+(http://\S+)`)
	printedTok  = regexp.MustCompile(`(?m)^(eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)\s*$`)
)

// TestQuickStart runs the commands of README.md's "Quick start" as a new
// user would: the demo command starts the gateway (the built binary, on a
// free port), every other command but `make` runs in one shell in order
// against it, with the endpoint and the token the demo printed, and each
// `make TARGET` is checked with `make -n TARGET` (running `make test` from
// a test would run this test again).
func TestQuickStart(t *testing.T) {
	readme := readRepoFile(t, "README.md")
	quick := section(readme, "Quick start")
	if quick == "" {
		t.Fatal(`README.md has no "## Quick start" section`)
	}
	blocks := fencedBlocks(quick, "sh")
	if len(blocks) == 0 {
		t.Fatal(`README.md's "Quick start" has no sh code block`)
	}

	var demoArgs []string
	var client []string // the client commands, in order
	var makeTargets []string
	for _, b := range blocks {
		for _, cmd := range shellCommands(b) {
			line := strings.TrimSpace(cmd)
			switch m := demoCmdRE.FindStringSubmatch(line); {
			case m != nil:
				if demoArgs != nil {
					t.Fatalf("the Quick start starts the demo twice: %q", line)
				}
				demoArgs = strings.Fields(m[1])
			case makeCmdRE.MatchString(line):
				makeTargets = append(makeTargets, makeCmdRE.FindStringSubmatch(line)[1])
			default:
				client = append(client, cmd)
			}
		}
	}

	if _, err := exec.LookPath("make"); err != nil && len(makeTargets) > 0 {
		t.Logf("make is not installed: not checking make %v", makeTargets)
		makeTargets = nil
	}
	for _, target := range makeTargets {
		cmd := exec.Command("make", "-n", target)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("make -n %s: %v\n%s", target, err, out)
		}
	}
	if demoArgs == nil {
		if len(client) > 0 {
			t.Fatalf("the Quick start runs commands but never starts the demo: %q", client)
		}
		return
	}
	if len(client) == 0 {
		t.Fatal("the Quick start starts the demo but never connects to it")
	}

	// The README's demo listens on 127.0.0.1:8080, which may be taken on a
	// test machine: the test substitutes -listen 127.0.0.1:0 (any free
	// port) and, in the client commands below, the endpoint the demo
	// printed for http://127.0.0.1:8080/mcp.
	var args []string
	for i := 0; i < len(demoArgs); i++ {
		if a := demoArgs[i]; a == "-listen" || a == "--listen" {
			i++
			continue
		} else if strings.HasPrefix(a, "-listen=") || strings.HasPrefix(a, "--listen=") {
			continue
		}
		args = append(args, demoArgs[i])
	}
	args = append(args, "-listen", "127.0.0.1:0")
	gw := testkit.StartGateway(t, testkit.BuildGateway(t), args, nil)

	// The banner goes to stdout, the "listening" line to stderr: wait for
	// the banner's token.
	var endpoint, token string
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := gw.Stdout()
		e, k := printedEP.FindStringSubmatch(out), printedTok.FindStringSubmatch(out)
		if e != nil && k != nil {
			endpoint, token = e[1], k[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo printed no endpoint and token:\n%s", gw.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if endpoint != gw.Endpoint {
		t.Errorf("the demo printed endpoint %s but listens on %s", endpoint, gw.Endpoint)
	}
	// What the README promises, but for the port.
	if want := regexp.MustCompile(`:\d+/`).ReplaceAllString(endpoint, ":8080/"); want != "http://127.0.0.1:8080/mcp" {
		t.Errorf("the demo's endpoint is %s: the README's http://127.0.0.1:8080/mcp is not what a user gets", want)
	}

	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("curl is not installed: the Quick start's client commands were not run")
	}
	script := strings.Join(client, "\n")
	if !tokenLineRE.MatchString(script) {
		t.Fatal("the Quick start's client commands must set TOKEN=... (the token the demo printed), for the test to substitute")
	}
	if !urlRE.MatchString(script) {
		t.Fatal("the Quick start's client commands must name the endpoint http://127.0.0.1:8080/mcp, for the test to substitute")
	}
	if !strings.Contains(script, `"method":"initialize"`) {
		t.Fatal("the Quick start's client commands do not initialize a session")
	}

	// One shell runs every command in order, as a user's terminal would;
	// after each, a marker line reports its exit status (and the value of
	// a variable it set).
	var sh strings.Builder
	for i, cmd := range client {
		cmd = tokenLineRE.ReplaceAllLiteralString(cmd, "TOKEN='"+token+"'")
		cmd = urlRE.ReplaceAllLiteralString(cmd, endpoint)
		fmt.Fprintf(&sh, "%s\nprintf '\\n@@@ %d %%s\\n' \"$?\"\n", cmd, i)
		if m := assignRE.FindStringSubmatch(strings.TrimSpace(cmd)); m != nil {
			fmt.Fprintf(&sh, "printf '@@@var %%s\\n' \"$%s\"\n", m[1])
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := exec.CommandContext(ctx, "sh", "-c", sh.String())
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil {
		t.Fatalf("sh: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}

	markerRE := regexp.MustCompile(`(?m)^@@@ (\d+) (\d+)\n(?:@@@var (.*)\n)?`)
	rest := string(out)
	for i, cmd := range client {
		loc := markerRE.FindStringSubmatchIndex(rest)
		if loc == nil {
			t.Fatalf("no status for command %d (%s); output:\n%s\nstderr:\n%s", i, cmd, rest, stderr.String())
		}
		m := markerRE.FindStringSubmatch(rest)
		output := strings.TrimSuffix(rest[:loc[0]], "\n")
		rest = rest[loc[1]:]
		if m[1] != fmt.Sprint(i) {
			t.Fatalf("command %d: marker of command %s", i, m[1])
		}
		if m[2] != "0" {
			t.Errorf("README Quick start: %s\nexit status %s; output:\n%s\nstderr:\n%s", cmd, m[2], output, stderr.String())
			continue
		}
		if v := assignRE.FindStringSubmatch(strings.TrimSpace(cmd)); v != nil && strings.TrimSpace(m[3]) == "" {
			t.Errorf("README Quick start: %s\nleft %s empty", cmd, v[1])
		}
		checkQuickStartOutput(t, cmd, output)
	}
}

var (
	statusLineRE = regexp.MustCompile(`(?m)^HTTP/[0-9.]+ (\d{3})`)
	sessionHdrRE = regexp.MustCompile(`(?mi)^mcp-session-id: *\S+`)
)

// checkQuickStartOutput checks what one client command printed.
func checkQuickStartOutput(t *testing.T, cmd, output string) {
	t.Helper()
	if output == "" {
		return // an assignment, or a notification's empty 202
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("README Quick start: %s\n%s; output:\n%s", cmd, fmt.Sprintf(format, args...), output)
	}
	if m := statusLineRE.FindStringSubmatch(output); m != nil && m[1] != "200" && m[1] != "202" {
		fail("HTTP status %s", m[1])
	}
	if strings.Contains(cmd, `"method":"initialize"`) {
		if m := statusLineRE.FindStringSubmatch(output); m == nil || m[1] != "200" {
			fail("initialize: want HTTP 200 (use curl -i to show it)")
		}
		if !sessionHdrRE.MatchString(output) {
			fail("initialize: no Mcp-Session-Id header")
		}
	}
	if strings.Contains(output, `"error"`) {
		fail("a JSON-RPC error")
	}
	if strings.Contains(cmd, `"id":`) && strings.Contains(cmd, `"jsonrpc"`) && !strings.Contains(output, `"result"`) {
		fail("no JSON-RPC result")
	}
}
