package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// line returns a report line of mcpload.
func line(scen, target string, round, clients int, mode string, rps, p50, p99 float64, errs int) string {
	return fmt.Sprintf(`{"url":"http://x/mcp","mode":%q,"payload_bytes":100,"clients":%d,"requests":10,"rps":%g,"errors":%d,`+
		`"latency_us":{"p50":%g,"p90":%g,"p99":%g,"max":%g},"tags":{"scenario":%q,"target":%q,"round":"%d"}}`,
		mode, clients, rps, errs, p50, p50*1.5, p99, p99*2, scen, target, round)
}

func TestSummarize(t *testing.T) {
	var in []string
	// c1: direct p50 100/110/90 by round, proxy +50 each round, memory +70,
	// redis +200 (with one slow round that the median ignores).
	for r, d := range []float64{100, 110, 90} {
		in = append(in,
			line("c1", "direct", r+1, 1, "call", 1000, d, 300, 0),
			line("c1", "proxy", r+1, 1, "call", 900, d+50, 400, 0),
			line("c1", "gw-memory", r+1, 1, "call", 800, d+70, 500, 0),
			line("c1", "gw-redis", r+1, 1, "call", 700, d+[]float64{200, 5000, 140}[r], 600, 0),
		)
	}
	// c32: proxy 10000 req/s, memory 8500 (ok), redis 6000 (missed).
	for r := range 3 {
		in = append(in,
			line("c32", "gw-redis", r+1, 32, "call", 6000, 3000, 9000, 0),
			line("c32", "gw-memory", r+1, 32, "call", 8500, 2500, 7000, r), // errors in rounds 2 and 3
			line("c32", "proxy", r+1, 32, "call", 10000, 2000, 6000, 0),
			line("c32", "direct", r+1, 32, "call", 20000, 1000, 3000, 0),
		)
	}
	// list: the memory gateway's upstream is asked in round 1 only, the
	// redis one's again in round 2.
	for r := range 2 {
		in = append(in,
			line("list", "direct", r+1, 1, "list", 500, 900, 1500, 0),
			line("list", "gw-memory", r+1, 1, "list", 2000, 400, 900, 0),
			line("list", "gw-redis", r+1, 1, "list", 1000, 900, 2500, 0),
			fmt.Sprintf(`{"annotation":"upstream","upstream_tools_list":%d,"tags":{"scenario":"list","target":"gw-memory","round":"%d"}}`, []int{20, 0}[r], r+1),
			fmt.Sprintf(`{"annotation":"upstream","upstream_tools_list":%d,"tags":{"scenario":"list","target":"gw-redis","round":"%d"}}`, []int{20, 3}[r], r+1),
		)
	}
	s, err := summarize(strings.NewReader(strings.Join(in, "\n") + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Scenarios) != 3 {
		t.Fatalf("%d scenarios", len(s.Scenarios))
	}
	c1, c32, list := s.Scenarios[0], s.Scenarios[1], s.Scenarios[2]

	var names []string
	for _, tg := range c32.Targets {
		names = append(names, tg.Name)
	}
	if got := strings.Join(names, ","); got != "direct,proxy,gw-memory,gw-redis" {
		t.Errorf("target order %s", got)
	}
	want := map[string]struct{ added, vsProxy float64 }{
		"proxy":     {50, 0},
		"gw-memory": {70, 1.4},
		"gw-redis":  {200, 4},
	}
	for name, w := range want {
		tg := c1.find(name)
		if tg.AddedP50 == nil || !near(*tg.AddedP50, w.added) {
			t.Errorf("c1 %s added p50 = %v, want %v", name, deref(tg.AddedP50), w.added)
		}
		if name != "proxy" && (tg.AddedVsProxy == nil || !near(*tg.AddedVsProxy, w.vsProxy)) {
			t.Errorf("c1 %s added / proxy = %v, want %v", name, deref(tg.AddedVsProxy), w.vsProxy)
		}
	}
	if d := c1.find("direct"); d.P50 != 100 || d.AddedP50 != nil || d.RPSVsProxy != nil {
		t.Errorf("c1 direct: %+v", d)
	}
	if m := c32.find("gw-memory"); !near(*m.RPSVsProxy, 0.85) || !near(*m.P99VsProxy, 7000.0/6000) || m.Errors != 3 {
		t.Errorf("c32 gw-memory: %+v", m)
	}
	if g := list.find("gw-redis"); *g.UpstreamListsFirst != 20 || *g.UpstreamListsLater != 3 || g.Rounds != 2 || g.P99 != 2500 {
		t.Errorf("list gw-redis: %+v", g)
	}

	got := map[string]bool{}
	for _, c := range s.Checks {
		got[c.Scenario+" "+c.Target+" "+c.What] = c.OK
	}
	wantChecks := map[string]bool{
		"c1 gw-memory added p50 / proxy's":                 true,  // 1.4 <= 1.5
		"c1 gw-redis added p50 / proxy's":                  false, // 4 > 2.5
		"c32 gw-memory req/s / proxy's":                    false, // 0.85, but errors
		"c32 gw-memory p99 / proxy's":                      false, // errors
		"c32 gw-redis req/s / proxy's":                     false, // 0.6 < 0.7
		"c32 gw-redis p99 / proxy's":                       true,  // 1.5
		"list gw-memory tools/list p99 (ms)":               true,
		"list gw-redis tools/list p99 (ms)":                false,
		"list gw-memory upstream tools/list after round 1": true,
		"list gw-redis upstream tools/list after round 1":  false,
	}
	if len(got) != len(wantChecks) {
		t.Errorf("checks: %v", got)
	}
	for k, w := range wantChecks {
		if ok, found := got[k]; !found || ok != w {
			t.Errorf("check %q: ok=%v (found %v), want %v", k, ok, found, w)
		}
	}

	var text bytes.Buffer
	if err := s.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, frag := range []string{"gw-redis", "4.00", "MISSED", "c32 gw-redis"} {
		if !strings.Contains(strings.Join(strings.Fields(text.String()), " "), frag) {
			t.Errorf("text lacks %q:\n%s", frag, text.String())
		}
	}
}

func TestRunWritesJSON(t *testing.T) {
	dir := t.TempDir()
	runs := filepath.Join(dir, "runs.jsonl")
	in := line("c1", "direct", 1, 1, "call", 1000, 100, 300, 0) + "\n" + line("c1", "proxy", 1, 1, "call", 900, 150, 400, 0) + "\n"
	if err := os.WriteFile(runs, []byte(in), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "s.json")
	var stdout bytes.Buffer
	if err := run([]string{"-o", out, "-meta", "rounds=1", runs}, &stdout, &stdout); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	if s.Meta["rounds"] != "1" || len(s.Scenarios) != 1 || *s.Scenarios[0].Targets[1].AddedP50 != 50 {
		t.Errorf("summary: %s", b)
	}
}

func TestSummarizeRejects(t *testing.T) {
	for name, in := range map[string]string{
		"no tags":   `{"rps":1}`,
		"not json":  `{`,
		"duplicate": line("c1", "direct", 1, 1, "call", 1, 1, 1, 0) + "\n" + line("c1", "direct", 1, 1, "call", 1, 1, 1, 0),
	} {
		if _, err := summarize(strings.NewReader(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{3, 1}, 2}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 100}, 3.5}} {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}
