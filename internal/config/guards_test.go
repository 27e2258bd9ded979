package config

import (
	"strings"
	"testing"
)

// TestGuardProblems: each guard mistake is reported at its key, with its
// line.
func TestGuardProblems(t *testing.T) {
	const base = "auth: {anonymous: true}\nupstreams:\n  - name: u\n    url: http://127.0.0.1:1/mcp\n    guards:\n"
	for _, c := range []struct{ guards, want string }{
		{"      - {detect: [credentials], patterns: [{kind: t, regexp: 'a(b'}]}\n",
			"test.yaml:6: upstreams[0].guards[0].patterns[0].regexp: is not a valid RE2 regular expression"},
		{"      - patterns: [{kind: t, regexp: 'x*'}]\n", "upstreams[0].guards[0].patterns[0].regexp: matches the empty string"},
		{"      - patterns: [{kind: email, regexp: 'x'}]\n", `upstreams[0].guards[0].patterns[0].kind: "email" is a built-in kind`},
		{"      - patterns: [{kind: Bad_Kind, regexp: 'x'}]\n", "upstreams[0].guards[0].patterns[0].kind:"},
		{"      - {detect: [secrets]}\n", `upstreams[0].guards[0].detect[0]: unknown detector "secrets"`},
		{"      - {detect: [email], action: mask}\n", `upstreams[0].guards[0].action: unknown action "mask"`},
		{"      - {detect: [email], phases: [calls]}\n", `upstreams[0].guards[0].phases[0]: unknown phase "calls"`},
		{"      - {detect: [email], oversize: drop}\n", `upstreams[0].guards[0].oversize: unknown value "drop"`},
		{"      - {detect: [email], phrases: [x]}\n", `upstreams[0].guards[0].phrases: applies to detector "instructions" only`},
		{"      - {name: g}\n", "upstreams[0].guards[0]: must set detect, patterns or webhook"},
		{"      - {name: a, detect: [email]}\n      - {name: a, detect: [iban]}\n", `upstreams[0].guards[1].name: duplicate guard name "a"`},
		{"      - {webhook: {url: http://h.example/g}, action: block}\n", "upstreams[0].guards[0].action: does not apply to a webhook guard"},
		{"      - {webhook: {url: ftp://h.example/g}}\n", "upstreams[0].guards[0].webhook.url: must be an absolute http or https URL"},
		{"      - {webhook: {url: http://h.example/g, on_error: retry}}\n", `upstreams[0].guards[0].webhook.on_error: unknown value "retry"`},
		{"      - {webhook: {url: http://h.example/g, tls: {server_name: x}}}\n", "upstreams[0].guards[0].webhook.tls: is set but the upstream's url is http"},
		{"      - {detect: [email], tools: [\"\"]}\n", "upstreams[0].guards[0].tools[0]: must not be empty"},
	} {
		_, err := Parse("test.yaml", []byte(base+c.guards), env(nil))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(c.guards), err, c.want)
		}
	}
	// The three places, and a valid guard of every shape.
	ok := base + `      - {name: creds, detect: [credentials, hidden_text], phases: [arguments, results], action: block, message: m, max_bytes: 100, oversize: pass}
      - {detect: [instructions], phrases: ["ignore previous"], tools: ["a*"]}
      - patterns: [{kind: ticket, regexp: 'T-[0-9]+'}]
      - webhook: {url: https://h.example/g, headers: {X-Key: k}, timeout: 1s, max_response_bytes: 10, max_in_flight: 2, on_error: allow}
tenants:
  - id: default
    guards: [{detect: [personal_data]}]
    upstreams: [{name: u, guards: [{detect: [iban], action: flag}]}]
`
	c, err := Parse("test.yaml", []byte(ok), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := c.Upstreams[0].Guards[3].Webhook.MarshalJSON(); strings.Contains(string(b), `"k"`) {
		t.Errorf("webhook headers printed: %s", b)
	}
}
