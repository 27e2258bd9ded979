package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcpgw/gateway/internal/cli"
)

// report is the outcome of a run, printed as text or as one JSON line.
type report struct {
	URL       string  `json:"url"`
	Mode      string  `json:"mode"`
	Tool      string  `json:"tool,omitempty"`
	Payload   int     `json:"payload_bytes"`
	Protocol  string  `json:"protocol"`
	Clients   int     `json:"clients"`
	Sessions  int     `json:"sessions"` // clients that opened a session
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	// Requests counts the requests sent in the measured window; OK those
	// that passed every check. RPS is OK per second: a target that fails
	// fast does not look fast.
	Requests int64   `json:"requests"`
	OK       int64   `json:"ok"`
	RPS      float64 `json:"rps"`
	Calls    int64   `json:"calls"`
	Lists    int64   `json:"lists"`
	// Errors counts every failed request or session, in the warm-up and
	// initialization too, by kind in ErrorKinds, with the first message of
	// each kind in ErrorSamples.
	Errors       int64             `json:"errors"`
	ErrorKinds   map[string]int64  `json:"error_kinds"`
	ErrorSamples map[string]string `json:"error_samples,omitempty"`
	// Latency is of the successful measured requests, from sending the
	// request to the end of the response body, in microseconds.
	Latency latency `json:"latency_us"`
	// ToolsListed is the number of tools of the last tools/list result.
	ToolsListed int               `json:"tools_listed,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`

	hist histogram
}

type latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// newReport merges the clients' stats; the caller merges the latencies
// into r.hist and calls [report.computeLatency].
func newReport(cfg *config, clients []*vclient, sessions int, measured time.Duration) *report {
	r := &report{
		URL: cfg.URL, Mode: cfg.Mode, Payload: cfg.Payload, Protocol: cfg.Protocol,
		Clients: cfg.Clients, Sessions: sessions,
		DurationS: measured.Seconds(), WarmupS: cfg.Warmup.Seconds(),
		ErrorKinds: make(map[string]int64),
	}
	if cfg.Mode != modeList {
		r.Tool = cfg.Tool
	}
	for _, c := range clients {
		st := &c.st
		r.Requests += st.requests
		r.OK += st.ok
		r.Calls += st.calls
		r.Lists += st.lists
		r.ToolsListed = max(r.ToolsListed, st.tools)
		for k, n := range st.errors {
			r.ErrorKinds[k] += n
			r.Errors += n
			if _, ok := r.ErrorSamples[k]; !ok {
				if r.ErrorSamples == nil {
					r.ErrorSamples = make(map[string]string)
				}
				r.ErrorSamples[k] = st.samples[k]
			}
		}
	}
	if measured > 0 {
		r.RPS = float64(r.OK) / measured.Seconds()
	}
	return r
}

// computeLatency fills in r.Latency from r.hist.
func (r *report) computeLatency() {
	r.Latency = latency{
		P50:  micros(r.hist.quantile(0.50)),
		P90:  micros(r.hist.quantile(0.90)),
		P99:  micros(r.hist.quantile(0.99)),
		Max:  micros(r.hist.quantile(1)),
		Mean: micros(r.hist.mean()),
	}
}

// writeJSON writes r as one line of JSON.
func (r *report) writeJSON(w io.Writer) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeText writes r for a person.
func (r *report) writeText(w io.Writer) error {
	var b strings.Builder
	what := "tools/list"
	switch r.Mode {
	case modeCall:
		what = fmt.Sprintf("tools/call %s, payload %d B", r.Tool, r.Payload)
	case modeMix:
		what = fmt.Sprintf("tools/call %s (payload %d B) and tools/list", r.Tool, r.Payload)
	}
	fmt.Fprintf(&b, "target    %s (%s, protocol %s)\n", r.URL, what, r.Protocol)
	fmt.Fprintf(&b, "clients   %d (%d sessions), %.1fs measured after %.1fs warm-up\n", r.Clients, r.Sessions, r.DurationS, r.WarmupS)
	fmt.Fprintf(&b, "requests  %d ok of %d, %.1f/s", r.OK, r.Requests, r.RPS)
	if r.Mode == modeMix {
		fmt.Fprintf(&b, " (%d calls, %d lists)", r.Calls, r.Lists)
	}
	if r.ToolsListed > 0 {
		fmt.Fprintf(&b, ", %d tools listed", r.ToolsListed)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "latency   p50 %s  p90 %s  p99 %s  max %s  mean %s\n",
		cli.Micros(r.Latency.P50), cli.Micros(r.Latency.P90), cli.Micros(r.Latency.P99), cli.Micros(r.Latency.Max), cli.Micros(r.Latency.Mean))
	fmt.Fprintf(&b, "errors    %d\n", r.Errors)
	for _, k := range slices.Sorted(maps.Keys(r.ErrorKinds)) {
		fmt.Fprintf(&b, "  %-14s %d  e.g. %s\n", k, r.ErrorKinds[k], r.ErrorSamples[k])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
