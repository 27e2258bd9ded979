package config

// What configures one upstream: how it is reached (URL or stdio
// process, TLS, credentials), bounded (concurrency, circuit breaker) and
// checked (validation); the rest of the config is in types.go.

// Concurrency bounds the requests in flight to one upstream from one
// replica.
type Concurrency struct {
	// MaxInFlight bounds the requests in flight to the upstream.
	MaxInFlight int `yaml:"max_in_flight" cfg:"positive"`
	// PerTenant, if set, bounds those of one tenant.
	PerTenant int `yaml:"per_tenant" cfg:"positive"`
	// Queue bounds the requests waiting for a slot; one more fails at
	// once. nil means the default, MaxInFlight; an explicit 0 means that
	// none wait (see [Concurrency.QueueSize]).
	Queue *int `yaml:"queue"`
	// QueuePerTenant bounds the waiting requests of one tenant, so that
	// one tenant's waiters cannot take the whole queue. Default half the
	// queue, rounded up (see [Concurrency.TenantQueue]).
	QueuePerTenant int `yaml:"queue_per_tenant" cfg:"positive"`
	// QueuePerPrincipal bounds the waiting requests of one principal, so
	// that one user or agent cannot take its whole tenant's share. Default
	// half the tenant's share, rounded up (see
	// [Concurrency.PrincipalQueue]).
	QueuePerPrincipal int `yaml:"queue_per_principal" cfg:"positive"`
	// QueueTimeout bounds the wait for a slot. Default 1s.
	QueueTimeout Duration `yaml:"queue_timeout"`
}

// CircuitBreaker stops calling an upstream that keeps failing.
type CircuitBreaker struct {
	// Failures is how many consecutive failures (transport errors, HTTP
	// 5xx, timeouts) open the circuit. Default 5.
	Failures int `yaml:"failures" cfg:"positive"`
	// OpenFor is how long the circuit stays open before probes are let
	// through. Default 30s.
	OpenFor Duration `yaml:"open_for"`
	// HalfOpenProbes is how many requests at once may probe a half-open
	// circuit. Default 1.
	HalfOpenProbes int `yaml:"half_open_probes" cfg:"positive"`
}

// Upstream is one upstream MCP server.
type Upstream struct {
	// Name matches [a-z0-9-]+ and is unique.
	Name string `yaml:"name"`
	// URL is the upstream's endpoint (http or https): its Streamable HTTP
	// endpoint, or the SSE endpoint of a 2024-11-05 HTTP+SSE server.
	// Empty for a stdio or openapi upstream.
	URL string `yaml:"url"`
	// Transport is how the gateway speaks to the upstream: TransportHTTP
	// (Streamable HTTP), TransportSSE (2024-11-05 HTTP+SSE), TransportAuto
	// (Streamable HTTP, else HTTP+SSE), TransportStdio (a local program)
	// or TransportOpenAPI (a REST API). Empty means TransportStdio when
	// Command is set, TransportOpenAPI when OpenAPI is, else TransportHTTP.
	Transport string `yaml:"transport"`
	// OpenAPI describes the REST API of an openapi upstream.
	OpenAPI *UpstreamOpenAPI `yaml:"openapi"`
	// Command is the program of a stdio upstream and its arguments, run
	// without a shell.
	Command []string `yaml:"command"`
	// Env is the environment of a stdio upstream's processes, after
	// ${ENV} expansion; the values are secrets. A tenant may override it.
	Env map[string]string `yaml:"env" cfg:"headers"`
	// WorkingDir is the working directory of a stdio upstream's
	// processes; empty means the gateway's.
	WorkingDir string `yaml:"working_dir"`
	// Stdio sets how a stdio upstream's processes are run. nil means the
	// defaults.
	Stdio *UpstreamStdio `yaml:"stdio"`
	// Prefix namespaces the upstream's names and URIs. nil means "use Name";
	// a pointer to "" means no namespace.
	Prefix *string `yaml:"prefix"`
	// Timeout bounds each request to this upstream. Default 30s.
	Timeout Duration `yaml:"timeout"`
	// Headers are sent on every request to this upstream, after ${ENV}
	// expansion. They are secrets: never logged or printed.
	Headers map[string]string `yaml:"headers" cfg:"headers"`
	// AuditArguments says what the audit log records of this upstream's
	// tool arguments: "none" (default), "hash" (SHA-256 of the arguments'
	// JSON) or "redacted" (the JSON with every string and number replaced).
	AuditArguments string `yaml:"audit_arguments"`
	// Watch keeps, on each replica, one stream open to the upstream for its
	// list_changed notifications, so that a change reaches clients at once
	// rather than when the list cache expires. nil means true.
	Watch *bool `yaml:"watch"`
	// Lists says whether the upstream's lists are the same for every
	// session ("shared": cached once per replica, within the identity the
	// upstream is reached with when credentials differ) or may differ per
	// upstream session ("per_session": fetched under each client's own
	// upstream session and never served to another). Unset (the default)
	// keys them by the identity the upstream is reached with: per tenant
	// for a stdio upstream with a process per tenant (or per session), per
	// tenant or user for credentials that differ so, and resources/list
	// per session for an upstream that opens a session per client session
	// (HTTP, or stdio isolation session). Empty means unset.
	Lists string `yaml:"lists"`
	// Auth says how the gateway proves who it is, or whom it calls for,
	// beyond the static Headers: a token from the upstream's authorization
	// server (client_credentials), the caller's token exchanged for one
	// (token_exchange), or a token the gateway signs (signed_identity).
	// nil means the static Headers alone. A tenant may override it.
	Auth *UpstreamAuth `yaml:"auth"`
	// TLS configures the TLS of an https upstream: the CAs it is verified
	// against, a client certificate (mTLS) and the name it is verified
	// as. nil means the system roots, no client certificate and the URL's
	// host. Its files are read when the config is validated and again
	// when the upstream's client is built (see [UpstreamTLS.Load]).
	TLS *UpstreamTLS `yaml:"tls"`
	// Concurrency bounds the requests in flight to the upstream, per
	// replica. nil: no bound.
	Concurrency *Concurrency `yaml:"concurrency"`
	// CircuitBreaker, if set, fails calls to the upstream at once, and
	// leaves it out of lists, while it keeps failing. Per replica.
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker"`
	// Instructions says what clients are told of the upstream's own
	// instructions. nil means mode "upstream".
	Instructions *UpstreamInstructions `yaml:"instructions"`
	// Validation says how the gateway checks tool calls against the tools'
	// schemas. nil means arguments "enforce", results "off".
	Validation *UpstreamValidation `yaml:"validation"`
	// Pin, if set, checks the upstream's tool and prompt definitions
	// against the pins file (see [Pins]).
	Pin *UpstreamPin `yaml:"pin"`
	// Guards are content guards on the upstream's arguments, results and
	// definitions, for every tenant (see [Guard] and docs/guards.md).
	Guards []Guard `yaml:"guards"`
}

// UpstreamValidation says how one upstream's tool calls are checked
// against the schemas its tools list.
type UpstreamValidation struct {
	// Arguments is "enforce" (the default: arguments that do not match
	// the tool's inputSchema get a tool error, and the upstream is not
	// called) or "off".
	Arguments string `yaml:"arguments"`
	// Results is "off" (the default), "warn" (a structuredContent that
	// does not match the tool's outputSchema is logged and counted) or
	// "enforce" (it also becomes a tool error).
	Results string `yaml:"results"`
}

// ValidateArguments reports whether u's tool arguments are checked.
func (u *Upstream) ValidateArguments() bool {
	return u.Validation == nil || u.Validation.Arguments != ValidationOff
}

// ResultValidation returns u's results mode: ValidationOff, ValidationWarn
// or ValidationEnforce.
func (u *Upstream) ResultValidation() string {
	if u.Validation == nil || u.Validation.Results == "" {
		return ValidationOff
	}
	return u.Validation.Results
}

// UpstreamInstructions says what the gateway's instructions hold of one
// upstream's: its own (mode "upstream", the default: an upstream's text
// goes to the model, so it is cleaned and bounded), the admin's Text
// instead ("override"), or nothing ("off").
type UpstreamInstructions struct {
	Mode string `yaml:"mode"`
	// Text replaces the upstream's instructions, with mode "override"
	// only; at most MaxInstructionsBytes.
	Text string `yaml:"text"`
}

// UpstreamStdio sets how the processes of a stdio upstream are run.
type UpstreamStdio struct {
	// Isolation says which sessions share a process: IsolationTenant (one
	// per tenant, the default), IsolationShared (one for all) or
	// IsolationSession (one per client session).
	Isolation string `yaml:"isolation"`
	// MaxProcesses bounds the upstream's processes on one replica.
	// Default 64.
	MaxProcesses int `yaml:"max_processes" cfg:"positive"`
	// MaxProcessesPerPrincipal and MaxProcessesPerTenant bound the
	// processes one principal and one tenant start of MaxProcesses. nil
	// means a quarter and a half of MaxProcesses (at least 1, see
	// [UpstreamStdio.Shares]); 0 means no bound but MaxProcesses.
	MaxProcessesPerPrincipal *int `yaml:"max_processes_per_principal"`
	MaxProcessesPerTenant    *int `yaml:"max_processes_per_tenant"`
	// IdleTimeout stops a process that served nothing for that long.
	// Default 10m.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// StopGrace is how long a process has to exit after SIGTERM before
	// SIGKILL. Default 5s.
	StopGrace Duration `yaml:"stop_grace"`
}

// Shares returns the processes one principal and one tenant start of the
// upstream's MaxProcesses (call after ApplyDefaults): as set, or derived
// from MaxProcesses (see [ProcessShares]).
func (s *UpstreamStdio) Shares() (principal, tenant int) {
	return shares(s.MaxProcesses, s.MaxProcessesPerPrincipal, s.MaxProcessesPerTenant)
}

// ProcessShares returns the processes of a pool of n one principal and
// one tenant hold when not configured: a quarter and a half of it, at
// least 1; 0 (no bound) when n is 0. pipe.DefaultShares is the same.
func ProcessShares(n int) (principal, tenant int) {
	if n <= 0 {
		return 0, 0
	}
	return max(1, n/4), max(1, n/2)
}

func shares(pool int, principal, tenant *int) (int, int) {
	p, t := ProcessShares(pool)
	if principal != nil {
		p = *principal
	}
	if tenant != nil {
		t = *tenant
	}
	return p, t
}

// GetEnv returns t's Env; nil for a nil t.
func (t *TenantUpstream) GetEnv() map[string]string {
	if t == nil {
		return nil
	}
	return t.Env
}

// IsOpenAPI reports whether u is an openapi upstream: a REST API whose
// operations are served as tools.
func (u *Upstream) IsOpenAPI() bool {
	return u.Transport == TransportOpenAPI || u.Transport == "" && u.OpenAPI != nil && len(u.Command) == 0
}

// UpstreamOpenAPI is the REST API of an openapi upstream (see
// docs/openapi-upstreams.md).
type UpstreamOpenAPI struct {
	// Document is the API's OpenAPI 3.0 or 3.1 document, JSON or YAML: a
	// file path, or an http or https URL fetched with the upstream's tls
	// settings. It is read when the config is loaded, and again at each
	// reload: a changed document changes the tools.
	Document string `yaml:"document"`
	// BaseURL is where the API's requests go, instead of the document's
	// servers. Empty: the document's first server, resolved against the
	// document's URL when it is relative.
	BaseURL string `yaml:"base_url"`
	// Include selects the operations served as tools: an operationId,
	// "tag:NAME", or "METHOD /path" where METHOD may be "*" and, in the
	// path, "*" matches one segment and a final "**" the rest. Empty:
	// every operation with an operationId.
	Include []string `yaml:"include"`
	// Exclude removes operations Include selected; same selectors.
	Exclude []string `yaml:"exclude"`
	// MaxDocumentBytes bounds the document. Default 4 MiB.
	MaxDocumentBytes int64 `yaml:"max_document_bytes" cfg:"positive"`

	// source is the document as read when the config was validated;
	// comparing two configs compares it too, so that a changed document
	// makes a new client.
	source []byte `yaml:"-"`
}

// Source returns the document as read when the config was validated; nil
// before.
func (o *UpstreamOpenAPI) Source() []byte {
	if o == nil {
		return nil
	}
	return o.source
}

// IsStdio reports whether u is a stdio upstream.
func (u *Upstream) IsStdio() bool {
	return u.Transport == TransportStdio || u.Transport == "" && len(u.Command) > 0
}

// UpstreamTLS is the TLS of the gateway's connections to one upstream.
// Certificate verification cannot be turned off.
type UpstreamTLS struct {
	// CAFile is a PEM bundle of the CA certificates trusted for this
	// upstream, instead of the system roots (not in addition to them).
	// Empty: the system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the PEM client certificate (followed by
	// any intermediates) and its private key, presented to the upstream
	// (mutual TLS). Both or neither.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName, if set, is the name sent in SNI and that the upstream's
	// certificate is verified against, instead of the URL's host.
	ServerName string `yaml:"server_name"`

	// fingerprint is the SHA-256 of the files' contents as validation
	// read them (see [UpstreamTLS.Fingerprint]). It is a field so that
	// reflect.DeepEqual of two Upstreams tells rotated files apart.
	fingerprint string `yaml:"-"`
}

// UpstreamAuth is how the gateway authenticates to one upstream.
type UpstreamAuth struct {
	// Mode is client_credentials, token_exchange, signed_identity or
	// user_oauth (each user's own token from the upstream's authorization
	// server, kept in the vault: see Vault).
	Mode string `yaml:"mode"`
	// TokenURL is the authorization server's token endpoint
	// (client_credentials, token_exchange). Issuer instead finds it by
	// discovery (RFC 8414, then OpenID Connect Discovery).
	TokenURL string `yaml:"token_url"`
	Issuer   string `yaml:"issuer"`
	// ClientID and ClientSecret are the gateway's client at that server,
	// sent with HTTP Basic authentication. The secret is a secret: ${VAR}
	// references are expanded, and it is never logged or printed.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret" cfg:"secret"`
	// Scopes are asked for (client_credentials, token_exchange) or put in
	// the token (signed_identity: default, the caller's own).
	Scopes []string `yaml:"scopes"`
	// Resource is the RFC 8707 resource indicator a token is asked for,
	// and Audience the RFC 8693 audience (token_exchange) or the aud of a
	// signed token (signed_identity; default: the upstream's URL).
	Resource string `yaml:"resource"`
	Audience string `yaml:"audience"`
	// Actor, with token_exchange, sends the gateway's own token (client
	// credentials of the same client) as the exchange's actor_token, so
	// that the issued token names the gateway as the party acting for the
	// user (its act claim, RFC 8693 §4.1).
	Actor bool `yaml:"actor"`
	// Header is where the token goes: "Authorization" (the default), as
	// "Bearer <token>", or the name of another header, holding the token
	// alone.
	Header string `yaml:"header"`
}

// SharedLists reports whether the upstream's lists may be shared between
// sessions at all (see Upstream.Lists): unless per_session. Unset, some
// are still shared only per tenant or per session (catalog.NewUpstream).
func (u *Upstream) SharedLists() bool { return u.Lists != ListsPerSession }

// Watches reports whether the upstream is watched (see Upstream.Watch).
// A stdio upstream is not watched unless Watch says so: the watch's own
// session would keep a process running on every replica.
func (u *Upstream) Watches() bool {
	if u.Watch == nil {
		// An openapi upstream's tools change only with its document.
		return !u.IsStdio() && !u.IsOpenAPI()
	}
	return *u.Watch
}

// EffectivePrefix returns the namespace prefix: the configured one, or the
// name when none is configured.
func (u *Upstream) EffectivePrefix() string {
	if u.Prefix != nil {
		return *u.Prefix
	}
	return u.Name
}
