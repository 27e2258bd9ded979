package config

import (
	"encoding/json"
	"time"
)

// Content guards (issue 30): what goes into a tool and what comes back is
// inspected by built-in detectors and external hooks, and redacted,
// blocked or flagged. The engine that runs them is package internal/guard;
// docs/guards.md describes them for admins.
//
// Guards are written under upstreams[].guards (for every tenant),
// tenants[].guards (for every upstream of the tenant) and
// tenants[].upstreams[].guards (for one upstream of one tenant); the
// guards that apply to a call are all of those, in that order.

// Guard is one content guard: built-in detectors (Detect, Patterns) with
// one action, or one external hook (Webhook).
type Guard struct {
	// Name names the guard in findings, the audit log and metrics:
	// [a-z0-9-]+, optional. Empty: its config path.
	Name string `yaml:"name"`
	// Phases are what the guard inspects: "arguments" (a tools/call's
	// arguments, after fixed arguments are set), "results" (tool results,
	// prompts/get messages, resources/read contents) and "definitions"
	// (tool, prompt and resource definitions in lists). Empty: all three,
	// except for a guard whose only detector is "instructions"
	// (definitions).
	Phases []string `yaml:"phases"`
	// Tools are glob patterns on tools' original names: the guard applies
	// to those tools only (their calls and definitions), not to prompts
	// or resources. nil: every item.
	Tools []string `yaml:"tools"`
	// Detect names built-in detectors: groups ("credentials",
	// "personal_data", "hidden_text", "instructions") or single kinds
	// ("aws-access-key", "email", ...; see docs/guards.md).
	Detect []string `yaml:"detect"`
	// Patterns are extra detectors: RE2 regular expressions, each with the
	// kind it names in markers and findings.
	Patterns []GuardPattern `yaml:"patterns"`
	// Phrases replace the default phrases of the "instructions" detector
	// (instructions aimed at the model), matched without regard to ASCII
	// case.
	Phrases []string `yaml:"phrases"`
	// Action is what a finding does: "redact" (replace the match with
	// [redacted:KIND]; hidden text is removed), "block" or "flag" (audit
	// and metric only). Empty: "flag" for instructions, "redact" for every
	// other detector.
	Action string `yaml:"action"`
	// Message is added to the message a block gives the model.
	Message string `yaml:"message"`
	// MaxBytes bounds the content (the JSON of the arguments, result or
	// definition) the guard inspects. Default 1 MiB.
	MaxBytes int64 `yaml:"max_bytes" cfg:"positive"`
	// Oversize is what happens to content larger than MaxBytes: "block"
	// (the default) or "pass" (passed uninspected by this guard, and
	// flagged as such).
	Oversize string `yaml:"oversize"`
	// Webhook, if set, makes the guard an external hook; it excludes
	// Detect, Patterns, Phrases and Action.
	Webhook *GuardWebhook `yaml:"webhook"`
}

// GuardPattern is one extra detector.
type GuardPattern struct {
	// Kind names what it finds, in markers and findings: [a-z0-9-]+.
	Kind string `yaml:"kind"`
	// Regexp is an RE2 regular expression (Go's regexp syntax), compiled
	// when the config is loaded.
	Regexp string `yaml:"regexp"`
}

// GuardWebhook is an external content hook: the gateway POSTs a JSON
// envelope to URL and the hook answers allow, block or replace (see
// docs/guards.md for the contract).
type GuardWebhook struct {
	// URL is the hook's endpoint, http or https.
	URL string `yaml:"url"`
	// Headers are sent with every request (an API key). Secrets, as
	// upstream headers are.
	Headers map[string]string `yaml:"headers" cfg:"headers"`
	// TLS configures the TLS of an https hook, as for upstreams.
	TLS *UpstreamTLS `yaml:"tls"`
	// Timeout bounds one request to the hook. Default 2s.
	Timeout Duration `yaml:"timeout"`
	// MaxResponseBytes bounds the hook's answer; a longer one is an
	// error. Default 1 MiB.
	MaxResponseBytes int64 `yaml:"max_response_bytes" cfg:"positive"`
	// MaxInFlight bounds the requests in flight to the hook from one
	// replica; one more is an error (see OnError). Default 32.
	MaxInFlight int `yaml:"max_in_flight" cfg:"positive"`
	// OnError is what happens when the hook cannot be asked (timeout,
	// error status, bad answer, MaxInFlight reached): "block" (the
	// default) or "allow".
	OnError string `yaml:"on_error"`
}

// Values of guards' phases, actions, oversize and on_error.
const (
	GuardPhaseArguments   = "arguments"
	GuardPhaseResults     = "results"
	GuardPhaseDefinitions = "definitions"

	GuardRedact = "redact"
	GuardBlock  = "block"
	GuardFlag   = "flag"
	GuardPass   = "pass"
	GuardAllow  = "allow"
)

// Defaults of the guard settings, applied by the guard engine when a
// setting is unset (zero).
const (
	DefaultGuardMaxBytes           = 1 << 20
	DefaultGuardWebhookTimeout     = Duration(2 * time.Second)
	DefaultGuardWebhookMaxResponse = 1 << 20
	DefaultGuardWebhookMaxInFlight = 32
)

// The groups of built-in detectors, and the kinds each finds. A guard's
// detect names groups or kinds.
const (
	GuardCredentials  = "credentials"
	GuardPersonalData = "personal_data"
	GuardHiddenText   = "hidden_text"
	GuardInstructions = "instructions"
)

var guardGroups = map[string][]string{
	GuardCredentials: {"aws-access-key", "gcp-service-account-key", "gcp-api-key", "azure-storage-key",
		"github-token", "gitlab-token", "slack-token", "private-key", "jwt", "url-credentials", "bearer-token"},
	GuardPersonalData: {"email", "phone", "payment-card", "iban"},
	GuardHiddenText:   {"tag-characters", "bidi-control", "zero-width", "ansi-escape"},
	GuardInstructions: {"instructions"},
}

// GuardGroups returns the names of the groups of built-in detectors.
func GuardGroups() []string {
	return []string{GuardCredentials, GuardPersonalData, GuardHiddenText, GuardInstructions}
}

// GuardKinds returns the kinds a detect entry names: those of a group, or
// the kind itself; ok is false for an unknown name.
func GuardKinds(name string) (kinds []string, ok bool) {
	if ks, ok := guardGroups[name]; ok {
		return ks, true
	}
	if GuardKindGroup(name) != "" {
		return []string{name}, true
	}
	return nil, false
}

// GuardKindGroup returns the group of a built-in kind; "" for none.
func GuardKindGroup(kind string) string {
	for g, ks := range guardGroups {
		for _, k := range ks {
			if k == kind {
				return g
			}
		}
	}
	return ""
}

// MarshalJSON encodes w with its header values redacted.
func (w GuardWebhook) MarshalJSON() ([]byte, error) {
	type plain GuardWebhook
	p := plain(w)
	p.URL = redactURL(w.URL)
	p.Headers = redactValues(w.Headers)
	return json.Marshal(p)
}

// String describes w for humans with its header values redacted.
func (w GuardWebhook) String() string {
	b, _ := w.MarshalJSON()
	return string(b)
}

// GoString is like String; it keeps %#v from printing header values.
func (w GuardWebhook) GoString() string { return "config.GuardWebhook" + w.String() }
