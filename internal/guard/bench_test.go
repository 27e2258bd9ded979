package guard

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// result10KB is a realistic 10 KB tool result: an issue tracker's search,
// as text (a Markdown table, as many servers write it) and as
// structuredContent (the same rows), with URLs, dates, numbers and prose.
// With findings, one row holds an AWS key, a card number and an e-mail.
func result10KB(findings bool) json.RawMessage {
	type row struct {
		ID      int    `json:"id"`
		Title   string `json:"title"`
		State   string `json:"state"`
		Author  string `json:"author"`
		URL     string `json:"url"`
		Created string `json:"created_at"`
		Labels  []string
		Body    string `json:"body"`
	}
	var rows []row
	var text strings.Builder
	text.WriteString("| # | title | state | author | created |\n|---|---|---|---|---|\n")
	for i := range 22 {
		r := row{ID: 4100 + i, Title: fmt.Sprintf("Crash in the exporter when batch %d exceeds the limit", i), State: "open",
			Author: fmt.Sprintf("dev-%d", i), URL: fmt.Sprintf("https://tracker.example.com/acme/api/issues/%d", 4100+i),
			Created: fmt.Sprintf("2025-03-%02dT10:%02d:00Z", i%28+1, i), Labels: []string{"bug", "p2"},
			Body: "Steps: run the exporter with 3 workers, v1.4.2, then wait 30s; it exits with code 137."}
		if findings && i == 7 {
			r.Body = "Config had key " + fakeAWS + ", paid with 4111 1111 1111 1111, contact ops@example.com."
		}
		rows = append(rows, r)
		fmt.Fprintf(&text, "| %d | %s | %s | %s | %s |\n%s\n", r.ID, r.Title, r.State, r.Author, r.Created, r.Body)
	}
	b, _ := json.Marshal(map[string]any{
		"content":           []any{map[string]any{"type": "text", "text": text.String()}},
		"structuredContent": map[string]any{"total": len(rows), "items": rows},
	})
	return b
}

func benchResult(b *testing.B, findings bool) {
	e := compile(b, "      - {detect: [credentials, personal_data]}\n", "", Options{})
	res := result10KB(findings)
	if len(res) < 9<<10 || len(res) > 12<<10 {
		b.Fatalf("result is %d bytes", len(res))
	}
	s := e.For("t", "u", "search")
	_, v := s.Result(ctx, &Input{}, res)
	if findings != (v.Action == Redact) {
		b.Fatalf("verdict %+v", v)
	}
	b.SetBytes(int64(len(res)))
	b.ReportAllocs()
	for b.Loop() {
		s.Result(ctx, &Input{}, res)
	}
}

// BenchmarkResult10KB: the built-in credential and personal-data
// detectors on a 10 KB result with three findings.
func BenchmarkResult10KB(b *testing.B) { benchResult(b, true) }

// BenchmarkResult10KBClean: the same result without findings.
func BenchmarkResult10KBClean(b *testing.B) { benchResult(b, false) }

// BenchmarkForOff: the cost of asking when no guard applies.
func BenchmarkForOff(b *testing.B) {
	e := compile(b, "", "", Options{})
	b.ReportAllocs()
	for b.Loop() {
		if e.For("t", "u", "search").Has(Results) {
			b.Fatal("a set")
		}
	}
}

// BenchmarkResultProse10KB: the built-in credential and personal-data
// detectors on the result bench/compare.sh's GUARDS=1 echoes: 10 KB of an
// issue tracker's prose in one text block, with nothing to find.
func BenchmarkResultProse10KB(b *testing.B) {
	const line = "Crash in the exporter when batch 7 exceeds the limit: run it with 3 workers, v1.4.2, " +
		"then wait 30s; it exits with code 137. See https://tracker.example.com/acme/api/issues/4107 (opened 2025-03-08T10:07:00Z by dev-7). "
	res := json.RawMessage(`{"content":[{"type":"text","text":"` + strings.Repeat(line, 10240/len(line)+1)[:10240] + `"}]}`)
	e := compile(b, "      - {detect: [credentials, personal_data]}\n", "", Options{})
	s := e.For("t", "u", "echo")
	if _, v := s.Result(ctx, &Input{}, res); v.Action != Pass || len(v.Findings) != 0 {
		b.Fatalf("verdict %+v", v)
	}
	b.SetBytes(int64(len(res)))
	b.ReportAllocs()
	for b.Loop() {
		s.Result(ctx, &Input{}, res)
	}
}
