package docs

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/mcpgw/gateway/internal/telemetry"
)

// TestDeployMetrics checks the Grafana dashboard and the Prometheus alert
// rules in deploy/ against the registered metrics, as TestMetricsReference
// checks docs/metrics.md: every mcpgw_ name they use is a metric the
// gateway registers (a histogram's _bucket, _sum and _count included), and
// both files parse.
func TestDeployMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	exerciseMetrics(telemetry.NewMetrics(reg))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	for _, f := range families {
		types[f.GetName()] = strings.ToLower(f.GetType().String())
	}
	exists := func(name string) bool {
		if _, ok := types[name]; ok {
			return true
		}
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(name, suffix); ok && types[b] == "histogram" {
				return true
			}
		}
		return false
	}

	dash := readRepoFile(t, "deploy/grafana/gateway-dashboard.json")
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal([]byte(dash), &d); err != nil {
		t.Fatalf("deploy/grafana/gateway-dashboard.json: %v", err)
	}
	if len(d.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	for _, p := range d.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if len(metricNameRE.FindAllString(tg.Expr, -1)) == 0 {
				t.Errorf("dashboard panel %q: %q names no mcpgw_ metric", p.Title, tg.Expr)
			}
		}
	}

	rules := readRepoFile(t, "deploy/prometheus/alerts.yaml")
	var r struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(rules), &r); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yaml: %v", err)
	}
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			if rule.Alert == "" || len(metricNameRE.FindAllString(rule.Expr, -1)) == 0 {
				t.Errorf("alert rule %q: no name, or %q names no mcpgw_ metric", rule.Alert, rule.Expr)
			}
		}
	}
	if n == 0 {
		t.Fatal("deploy/prometheus/alerts.yaml has no rules")
	}

	for file, text := range map[string]string{"deploy/grafana/gateway-dashboard.json": dash, "deploy/prometheus/alerts.yaml": rules} {
		for _, name := range metricNameRE.FindAllString(text, -1) {
			if !exists(name) {
				t.Errorf("%s names %s, which is not a registered metric", file, name)
			}
		}
	}
}
