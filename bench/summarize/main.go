// Command summarize turns the runs of bench/compare.sh into its summary:
// per scenario and target the medians over rounds, and the ratios issue 7
// sets targets for, all measured in the same run.
//
//	summarize [-o FILE] [-meta key=value]... RUNS.jsonl
//
// RUNS.jsonl holds one line per run: mcpload's -json report, tagged
// scenario, target and round. Lines with an "annotation" member add facts
// about a run (the upstream's tools/list count during it). It prints a table
// and, with -o, writes the summary as JSON.
//
// Ratios are against the bare reverse proxy ("proxy"), never absolute
// figures: these machines are shared and noisy, so only figures from one
// run, alternated round by round, are compared. Added latency is paired by
// round: p50(target) - p50(direct) of the same round, then the median over
// rounds.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mcpgw/gateway/internal/cli"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "summarize:", err)
		}
		os.Exit(1)
	}
}

// Target names compare.sh uses. Gateways are the targets named gw-*.
const (
	targetDirect = "direct"
	targetProxy  = "proxy"
	targetMemory = "gw-memory"
	targetRedis  = "gw-redis"
)

// knownTargets is the order of targets in the table; others follow, sorted.
var knownTargets = []string{targetDirect, targetProxy, targetMemory, targetRedis}

// runLine is one line of RUNS.jsonl: a report of mcpload or an annotation.
type runLine struct {
	Annotation string            `json:"annotation"`
	Tags       map[string]string `json:"tags"`

	Mode     string  `json:"mode"`
	Payload  int     `json:"payload_bytes"`
	Clients  int     `json:"clients"`
	Requests int64   `json:"requests"`
	RPS      float64 `json:"rps"`
	Errors   int64   `json:"errors"`
	Latency  struct {
		P50, P90, P99, Max float64
	} `json:"latency_us"`
	ToolsListed int `json:"tools_listed"`

	// UpstreamToolsList is, in an annotation, how many tools/list requests
	// the target's upstream(s) received during the run.
	UpstreamToolsList *int64 `json:"upstream_tools_list"`
}

// Summary is the JSON output.
type Summary struct {
	Meta      map[string]string `json:"meta"`
	Scenarios []*Scenario       `json:"scenarios"`
	Checks    []Check           `json:"checks"`
}

// Scenario is one load shape, measured on every target.
type Scenario struct {
	Name    string    `json:"name"`
	Mode    string    `json:"mode"`
	Clients int       `json:"clients"`
	Payload int       `json:"payload_bytes"`
	Targets []*Target `json:"targets"`
}

// Target holds one target's medians over the rounds of a scenario, and its
// ratios to the proxy (nil where they do not apply or cannot be computed).
type Target struct {
	Name   string `json:"name"`
	Rounds int    `json:"rounds"`
	// Medians over rounds; latencies in microseconds.
	RPS    float64 `json:"rps"`
	P50    float64 `json:"p50_us"`
	P90    float64 `json:"p90_us"`
	P99    float64 `json:"p99_us"`
	Max    float64 `json:"max_us"`
	Errors int64   `json:"errors"` // summed over rounds
	// AddedP50 is the median over rounds of p50 - the direct p50 of the
	// same round.
	AddedP50 *float64 `json:"added_p50_us,omitempty"`
	// AddedVsProxy, RPSVsProxy and P99VsProxy are the ratios to the proxy.
	AddedVsProxy *float64 `json:"added_p50_vs_proxy,omitempty"`
	RPSVsProxy   *float64 `json:"rps_vs_proxy,omitempty"`
	P99VsProxy   *float64 `json:"p99_vs_proxy,omitempty"`
	// UpstreamListsFirst and UpstreamListsLater count the tools/list
	// requests the upstream(s) received during round 1 (which fills a
	// gateway's cache) and during the later rounds (which must be served
	// from the cache), where compare.sh counted them.
	UpstreamListsFirst *int64 `json:"upstream_tools_list_round1,omitempty"`
	UpstreamListsLater *int64 `json:"upstream_tools_list_later_rounds,omitempty"`
	ToolsListed        int    `json:"tools_listed,omitempty"`

	rounds map[string]*runLine
}

// Check is one target of issue 7 measured in this run.
type Check struct {
	Scenario string   `json:"scenario"`
	Target   string   `json:"target"`
	What     string   `json:"what"`
	Value    *float64 `json:"value"` // nil: not measurable in this run
	Op       string   `json:"op"`    // "<=", ">=" or "<"
	Limit    float64  `json:"limit"`
	OK       bool     `json:"ok"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("summarize", stderr)
	out := fs.String("o", "", "write the summary as JSON to this file")
	meta := cli.KeyValues{}
	fs.Var(meta, "meta", "key=value recorded in the JSON summary (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("want one RUNS.jsonl argument")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	s, err := summarize(f)
	if err != nil {
		return err
	}
	s.Meta = meta
	if err := s.writeText(stdout); err != nil {
		return err
	}
	if *out != "" {
		b, err := json.MarshalIndent(s, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// summarize reads the runs and computes the summary.
func summarize(r io.Reader) (*Summary, error) {
	s := &Summary{}
	byName := map[string]*Scenario{}
	var notes []*runLine
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		rl := new(runLine)
		if err := json.Unmarshal([]byte(line), rl); err != nil {
			return nil, fmt.Errorf("line %d: %v", n, err)
		}
		scen, tgt, round := rl.Tags["scenario"], rl.Tags["target"], rl.Tags["round"]
		if scen == "" || tgt == "" || round == "" {
			return nil, fmt.Errorf("line %d: want tags scenario, target and round", n)
		}
		if rl.Annotation != "" {
			notes = append(notes, rl)
			continue
		}
		sn := byName[scen]
		if sn == nil {
			sn = &Scenario{Name: scen, Mode: rl.Mode, Clients: rl.Clients, Payload: rl.Payload}
			byName[scen] = sn
			s.Scenarios = append(s.Scenarios, sn)
		}
		t := sn.target(tgt)
		if _, dup := t.rounds[round]; dup {
			return nil, fmt.Errorf("line %d: a second run of %s %s round %s", n, scen, tgt, round)
		}
		t.rounds[round] = rl
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for _, a := range notes {
		sn := byName[a.Tags["scenario"]]
		if sn == nil || a.UpstreamToolsList == nil {
			continue
		}
		t := sn.target(a.Tags["target"])
		sum := &t.UpstreamListsLater
		if a.Tags["round"] == "1" {
			sum = &t.UpstreamListsFirst
		}
		if *sum == nil {
			*sum = new(int64)
		}
		**sum += *a.UpstreamToolsList
	}
	for _, sn := range s.Scenarios {
		sn.compute()
		s.Checks = append(s.Checks, sn.checks()...)
	}
	return s, nil
}

func (sn *Scenario) target(name string) *Target {
	for _, t := range sn.Targets {
		if t.Name == name {
			return t
		}
	}
	t := &Target{Name: name, rounds: map[string]*runLine{}}
	sn.Targets = append(sn.Targets, t)
	slices.SortStableFunc(sn.Targets, func(a, b *Target) int { return targetOrder(a.Name) - targetOrder(b.Name) })
	return t
}

func targetOrder(name string) int {
	if i := slices.Index(knownTargets, name); i >= 0 {
		return i
	}
	return len(knownTargets)
}

func (sn *Scenario) find(name string) *Target {
	for _, t := range sn.Targets {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// compute fills in the medians and ratios of every target.
func (sn *Scenario) compute() {
	for _, t := range sn.Targets {
		var rps, p50, p90, p99, mx []float64
		for _, rl := range t.rounds {
			rps = append(rps, rl.RPS)
			p50 = append(p50, rl.Latency.P50)
			p90 = append(p90, rl.Latency.P90)
			p99 = append(p99, rl.Latency.P99)
			mx = append(mx, rl.Latency.Max)
			t.Errors += rl.Errors
			t.ToolsListed = max(t.ToolsListed, rl.ToolsListed)
		}
		t.Rounds = len(t.rounds)
		t.RPS, t.P50, t.P90, t.P99, t.Max = median(rps), median(p50), median(p90), median(p99), median(mx)
	}
	direct, proxy := sn.find(targetDirect), sn.find(targetProxy)
	if direct != nil {
		for _, t := range sn.Targets {
			if t == direct {
				continue
			}
			var added []float64
			for round, rl := range t.rounds {
				if d, ok := direct.rounds[round]; ok && rl.OKLatency() && d.OKLatency() {
					added = append(added, rl.Latency.P50-d.Latency.P50)
				}
			}
			if len(added) > 0 {
				t.AddedP50 = ptr(median(added))
			}
		}
	}
	if proxy == nil {
		return
	}
	for _, t := range sn.Targets {
		if t == proxy || t == direct {
			continue
		}
		if t.AddedP50 != nil && proxy.AddedP50 != nil && *proxy.AddedP50 > 0 {
			t.AddedVsProxy = ptr(*t.AddedP50 / *proxy.AddedP50)
		}
		if proxy.RPS > 0 {
			t.RPSVsProxy = ptr(t.RPS / proxy.RPS)
		}
		if proxy.P99 > 0 && t.P99 > 0 {
			t.P99VsProxy = ptr(t.P99 / proxy.P99)
		}
	}
}

// OKLatency reports whether the run has latencies to compare.
func (rl *runLine) OKLatency() bool { return rl.Latency.P50 > 0 }

// checks returns issue 7's targets that this scenario measures: added
// latency for one client, throughput and p99 for many (both for any payload
// size), and for tools/list the p99 bound and the upstream's idleness.
func (sn *Scenario) checks() []Check {
	var cs []Check
	add := func(t *Target, what string, v *float64, op string, limit float64) {
		c := Check{Scenario: sn.Name, Target: t.Name, What: what, Value: v, Op: op, Limit: limit}
		if v != nil {
			switch op {
			case "<=":
				c.OK = *v <= limit
			case ">=":
				c.OK = *v >= limit
			case "<":
				c.OK = *v < limit
			}
		}
		if t.Errors > 0 {
			c.OK = false
		}
		cs = append(cs, c)
	}
	for _, t := range sn.Targets {
		redis := t.Name == targetRedis
		if !strings.HasPrefix(t.Name, "gw-") {
			continue
		}
		switch {
		case sn.Mode == "list":
			add(t, "tools/list p99 (ms)", ptr(t.P99/1000), "<", 2)
			if t.UpstreamListsLater != nil {
				// Round 1 fills the cache; later rounds, well within the
				// cache's TTL, must not reach the upstreams.
				v := float64(*t.UpstreamListsLater)
				add(t, "upstream tools/list after round 1", &v, "<=", 0)
			}
		case sn.Clients == 1:
			add(t, "added p50 / proxy's", t.AddedVsProxy, "<=", pick(redis, 2.5, 1.5))
		default:
			add(t, "req/s / proxy's", t.RPSVsProxy, ">=", pick(redis, 0.7, 0.8))
			add(t, "p99 / proxy's", t.P99VsProxy, "<=", 1.5)
		}
	}
	return cs
}

func pick(redis bool, ifRedis, otherwise float64) float64 {
	if redis {
		return ifRedis
	}
	return otherwise
}

func ptr[T any](v T) *T { return &v }

// median returns the median of xs (the mean of the two middle values for
// an even count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeText prints the summary table and the checks.
func (s *Summary) writeText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttarget\treq/s\tp50\tp90\tp99\tmax\terrors\t+p50 vs direct\t+p50 / proxy's\treq/s / proxy's\tp99 / proxy's\t")
	for _, sn := range s.Scenarios {
		for _, t := range sn.Targets {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n",
				sn.Name, t.Name, t.RPS, cli.Micros(t.P50), cli.Micros(t.P90), cli.Micros(t.P99), cli.Micros(t.Max), t.Errors,
				optUS(t.AddedP50), ratio(t.AddedVsProxy), ratio(t.RPSVsProxy), ratio(t.P99VsProxy))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nscenarios:")
	for _, sn := range s.Scenarios {
		desc := fmt.Sprintf("tools/call, %d B payload", sn.Payload)
		if sn.Mode == "list" {
			desc = "tools/list"
			for _, t := range sn.Targets {
				if t.ToolsListed > 0 {
					desc += fmt.Sprintf(", %d tools", t.ToolsListed)
					break
				}
			}
		}
		rounds := 0
		for _, t := range sn.Targets {
			rounds = max(rounds, t.Rounds)
		}
		fmt.Fprintf(w, "  %-10s %d client(s), %s, medians of %d round(s)", sn.Name, sn.Clients, desc, rounds)
		for _, t := range sn.Targets {
			if t.UpstreamListsFirst != nil || t.UpstreamListsLater != nil {
				fmt.Fprintf(w, "; %s's upstreams got %s tools/list in round 1, %s after", t.Name, optInt(t.UpstreamListsFirst), optInt(t.UpstreamListsLater))
			}
		}
		fmt.Fprintln(w)
	}
	if len(s.Checks) > 0 {
		fmt.Fprintln(w, "\nissue 7 targets, in this run:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, c := range s.Checks {
			v := "n/a"
			if c.Value != nil {
				v = strconv.FormatFloat(*c.Value, 'f', 2, 64)
			}
			verdict := "ok"
			if !c.OK {
				verdict = "MISSED"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s %s %g\t%s\n", c.Scenario, c.Target, c.What, v, c.Op, c.Limit, verdict)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func optUS(v *float64) string {
	if v == nil {
		return "-"
	}
	if math.Abs(*v) >= 1e3 {
		return cli.Micros(*v)
	}
	return fmt.Sprintf("%.0fµs", *v)
}

func optInt(v *int64) string {
	if v == nil {
		return "-"
	}
	return strconv.FormatInt(*v, 10)
}

func ratio(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *v)
}
