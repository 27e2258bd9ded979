package config

import "time"

// Policy rules (issue 29): rules inside a tenant, on the caller's claims,
// groups, scopes and client id and on a call's arguments, and an external
// decision point (OpenID AuthZEN). The engine that runs them is package
// internal/policy; docs/policy.md describes the model.

// Policy holds the settings the policy rules of every tenant share.
type Policy struct {
	// GroupsClaim is the claim that holds the caller's groups, for the
	// groups condition and principal.groups: a string (one group) or an
	// array of strings; a dotted path reaches into nested objects, as
	// tenant_claim does. Default "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// CELCostLimit bounds a cel condition: its estimated worst-case cost
	// at load, and its actual cost on each evaluation (over it, the
	// condition fails and the rule decides as on an error: a deny).
	// Default 100000.
	CELCostLimit int64 `yaml:"cel_cost_limit" cfg:"positive"`
	// PDP is the external decision point that rules with effect "pdp"
	// ask. nil: none (such rules are an error).
	PDP *PolicyPDP `yaml:"pdp"`
}

// PolicyPDP is an OpenID AuthZEN 1.0 Access Evaluation API endpoint.
type PolicyPDP struct {
	// URL is the PDP's base URL: the gateway POSTs to
	// URL/access/v1/evaluation and URL/access/v1/evaluations.
	URL string `yaml:"url"`
	// Headers are sent with every request (an Authorization header, an
	// API key). Secrets, as upstream headers are.
	Headers map[string]string `yaml:"headers" cfg:"headers"`
	// TLS configures the TLS of an https PDP, as for upstreams.
	TLS *UpstreamTLS `yaml:"tls"`
	// Auth, if set, authenticates the gateway to the PDP with an access
	// token of its own: mode client_credentials only (OAuth 2.0 client
	// credentials grant, RFC 6749 section 4.4), the token sent in the
	// Authorization header (or auth.header) of every request.
	Auth *UpstreamAuth `yaml:"auth"`
	// Timeout bounds one request to the PDP. Default 500ms.
	Timeout Duration `yaml:"timeout"`
	// CacheTTL is how long a decision is reused for the same principal,
	// action, resource (and arguments, when they are sent). Default 30s.
	CacheTTL Duration `yaml:"cache_ttl"`
	// CacheSize bounds the decisions kept; the oldest goes first.
	// Default 10000.
	CacheSize int `yaml:"cache_size" cfg:"positive"`
}

// PolicyRule is one rule of a tenant (tenants[].policy) or of one of its
// upstreams (tenants[].upstreams[].policy). A rule applies to a request
// when Match matches its item, every condition of When holds and not
// every condition of Unless does; the first rule of its phase that
// applies decides.
type PolicyRule struct {
	// Name names the rule in the audit log and in explain; optional.
	Name string `yaml:"name"`
	// Phase is "list" (the rule decides what the caller is shown, and so
	// what it may use at all) or "call" (it decides each call, and may
	// read the arguments). Required.
	Phase string `yaml:"phase"`
	// Match selects the items the rule is about. Empty: every item.
	Match PolicyMatch `yaml:"match"`
	// When holds the conditions that must all hold. nil: none.
	When *PolicyCondition `yaml:"when"`
	// Unless holds conditions that, when they all hold, make the rule
	// not apply. nil: none.
	Unless *PolicyCondition `yaml:"unless"`
	// Effect is "allow", "deny" or "pdp" (the PDP decides).
	Effect string `yaml:"effect"`
	// OnPDPError is what a rule with effect "pdp" decides when the PDP
	// cannot be asked (timeout, error, bad answer): "closed" (default:
	// deny) or "open" (allow).
	OnPDPError string `yaml:"on_pdp_error"`
	// PDPArguments sends the call's arguments to the PDP (in the
	// request's context): phase "call" and effect "pdp" only.
	PDPArguments bool `yaml:"pdp_arguments"`
	// Refusal says how a call this rule refuses is answered: "result" (a
	// tool result with isError, that the model reads) or "error" (a
	// JSON-RPC error). Default: "result" for a call-phase rule that reads
	// the arguments, "error" otherwise. A list-phase rule's refusal is
	// always an unknown item.
	Refusal string `yaml:"refusal"`
	// Message is added to the refusal the model reads, after what the
	// gateway says itself (which argument, what is allowed).
	Message string `yaml:"message"`
}

// PolicyMatch selects items by glob patterns (as tenant rules have them)
// on the upstream's original names and URIs. When none of Tools, Prompts
// and Resources is set, every item of every kind matches; else only the
// items of the kinds set, whose name matches one of their patterns.
type PolicyMatch struct {
	// Upstreams are patterns on upstream names, in a tenant's rules only.
	// nil: any.
	Upstreams []string `yaml:"upstreams"`
	Tools     []string `yaml:"tools"`
	Prompts   []string `yaml:"prompts"`
	Resources []string `yaml:"resources"`
}

// PolicyCondition is a set of conditions on the caller and the call. It
// holds when every condition that is set holds; an empty one always does.
type PolicyCondition struct {
	// Claims match claims of the caller's token, all of them.
	Claims []ClaimMatch `yaml:"claims"`
	// Groups holds when the caller is in at least one of them
	// (policy.groups_claim).
	Groups []string `yaml:"groups"`
	// Scopes holds when the caller's token carries every one of them.
	Scopes []string `yaml:"scopes"`
	// ClientIDs holds when the caller's client (azp, else client_id) is
	// one of them.
	ClientIDs []string `yaml:"client_ids"`
	// Arguments match the call's arguments, all of them; phase "call"
	// only.
	Arguments []ArgumentMatch `yaml:"arguments"`
	// CEL is a CEL expression of type bool (see docs/policy.md for its
	// variables).
	CEL string `yaml:"cel"`
}

// ClaimMatch matches one claim; exactly one of Equals, Contains and OneOf
// is set.
type ClaimMatch struct {
	// Claim names the claim; a dotted path reaches into nested objects,
	// as tenant_claim does.
	Claim string `yaml:"claim"`
	// Equals holds when the claim is this string (a number or boolean
	// claim is compared in its JSON form).
	Equals string `yaml:"equals"`
	// Contains holds when the claim is an array holding this string, or a
	// string holding it as one of its space-separated words.
	Contains string `yaml:"contains"`
	// OneOf holds when the claim is one of these strings.
	OneOf []string `yaml:"one_of"`
}

// ArgumentMatch matches one argument of a call; exactly one of Name and
// Pointer, and exactly one of Equals, Glob and OneOf, are set. A missing
// argument matches nothing.
type ArgumentMatch struct {
	// Name is a top-level argument.
	Name string `yaml:"name"`
	// Pointer is a JSON pointer (RFC 6901) into the arguments, such as
	// "/repo/owner".
	Pointer string `yaml:"pointer"`
	// Equals holds when the argument is this string (a number or boolean
	// in its JSON form).
	Equals string `yaml:"equals"`
	// Glob holds when the argument is a string the pattern matches.
	Glob string `yaml:"glob"`
	// OneOf holds when the argument is one of these strings.
	OneOf []string `yaml:"one_of"`
}

// Values of policy rules' phase, effect, on_pdp_error and refusal.
const (
	PhaseList = "list"
	PhaseCall = "call"

	EffectAllow = "allow"
	EffectDeny  = "deny"
	EffectPDP   = "pdp"

	RefusalResult = "result"
	RefusalError  = "error"
)

// Defaults of the policy settings, applied by the policy engine when a
// setting is unset (zero).
const (
	DefaultGroupsClaim  = "groups"
	DefaultCELCostLimit = 100000
	DefaultPDPTimeout   = Duration(500 * time.Millisecond)
	DefaultPDPCacheTTL  = Duration(30 * time.Second)
	DefaultPDPCacheSize = 10000
)

// ReadsArguments reports whether c has argument matchers (a cel
// condition may read them too: see package internal/policy/celenv).
func (c *PolicyCondition) ReadsArguments() bool { return c != nil && len(c.Arguments) > 0 }
