// Package config loads, expands and validates the gateway's YAML
// configuration.
//
// A Config is one immutable value: the gateway swaps a whole new one in on
// reload and each request keeps the snapshot it started with. Decoding is
// strict (unknown keys, wrong types and duplicates are errors) and every
// problem is reported at once with its file and line.
//
// The types below are the YAML schema: a key is a struct field, named by
// its yaml tag, decoded as its type says, with a cfg tag for what the type
// cannot say (positive, secret, nonempty=HINT, ornone=WHAT, ratio,
// headers; see option in load.go).
package config

import (
	"fmt"
	"time"
)

// Config is the whole gateway configuration.
type Config struct {
	Server    Server     `yaml:"server"`
	Sessions  Sessions   `yaml:"sessions"`
	Upstreams []Upstream `yaml:"upstreams"`
	Auth      Auth       `yaml:"auth"`
	Tenants   []Tenant   `yaml:"tenants"`
	Limits    Limits     `yaml:"limits"`
	Telemetry Telemetry  `yaml:"telemetry"`
	Identity  Identity   `yaml:"identity"`
	Budgets   Budgets    `yaml:"budgets"`
	Pins      Pins       `yaml:"pins"`
	Vault     Vault      `yaml:"vault"`
	Admin     Admin      `yaml:"admin"`
	// Policy holds what the policy rules of every tenant share: the
	// groups claim, the CEL cost limit and the external decision point.
	Policy Policy `yaml:"policy"`

	// Path is the file the config was loaded from ("" when built in code).
	Path string `yaml:"-"`

	// Warnings are what [Parse] or [Config.Validate] found that looks wrong
	// but is allowed, such as a tenant rule pattern that can never match
	// (see [Config.Validate] for the list). They never make Parse fail; log
	// them. Parse sorts them by line; Validate replaces them with its own,
	// which have no lines.
	Warnings []Problem `yaml:"-"`
}

// Admin configures what the admin listener (server.admin_listen) serves
// beyond /metrics, /healthz and /readyz.
type Admin struct {
	Console AdminConsole `yaml:"console"`
}

// AdminConsole configures the operator console at /console on the admin
// listener, read-only unless VaultUnlink is set. It is served only when
// the admin listener is on a loopback address, to requests that arrive
// there, or when Auth is set.
type AdminConsole struct {
	// Auth, if set, is what a request must show to read the console, on
	// any address. nil: loopback only, without authentication.
	Auth *ConsoleAuth `yaml:"auth"`
	// VaultUnlink lets the console's vault page list the users linked to
	// each user_oauth upstream and unlink one (revoke and delete its
	// token). false: the page shows counts only.
	VaultUnlink bool `yaml:"vault_unlink"`
}

// ConsoleAuth is how the console authenticates its readers: exactly one
// of Bearer and OIDC.
type ConsoleAuth struct {
	// Bearer is a static secret, at least MinConsoleBearer bytes: sent as
	// "Authorization: Bearer", or typed once in the console's sign-in
	// form, which keeps it in a cookie. Typically ${VAR}.
	Bearer string `yaml:"bearer" cfg:"secret"`
	// OIDC, if set, signs readers in at an OpenID provider instead.
	OIDC *ConsoleOIDC `yaml:"oidc"`
}

// ConsoleOIDC is the console's client at an OpenID provider: a reader
// signs in there (authorization code with PKCE), and may read the console
// when the ID token's subject is among Subjects or one of its groups
// (GroupsClaim) among Groups.
type ConsoleOIDC struct {
	// Issuer is the provider's issuer URL; its metadata is discovered
	// at Issuer/.well-known/openid-configuration.
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecret are the console's client there; no secret
	// for a public client.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret" cfg:"secret"`
	// RedirectURL is the console's callback as the browser reaches it:
	// https://<admin host>/console/callback, registered at the provider.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes are asked for; they must include openid. Empty: openid.
	Scopes []string `yaml:"scopes"`
	// Subjects are the ID token subjects (sub) allowed in.
	Subjects []string `yaml:"subjects"`
	// GroupsClaim names the ID token claim holding the reader's groups (a
	// list of strings, or one string; a dotted path reaches into nested
	// claims), and Groups those of them allowed in.
	GroupsClaim string   `yaml:"groups_claim"`
	Groups      []string `yaml:"groups"`
}

// ConsoleCallbackPath is the path of admin.console.auth.oidc.redirect_url.
const ConsoleCallbackPath = "/console/callback"

// OIDCScopes returns the scopes to ask for: Scopes, or openid.
func (o *ConsoleOIDC) OIDCScopes() []string {
	if len(o.Scopes) == 0 {
		return []string{"openid"}
	}
	return o.Scopes
}

// MinConsoleBearer is the shortest admin.console.auth.bearer accepted:
// 128 bits as hex, so that guessing it is out of reach.
const MinConsoleBearer = 32

// Identity configures the tokens the gateway signs for upstreams with
// auth mode signed_identity, and the keys it publishes at
// /.well-known/jwks.json.
type Identity struct {
	// SigningKeys are PEM files of private keys (EC P-256 for ES256, RSA
	// of 2048 bits or more for RS256). The first signs; all are
	// published, so that a key being rotated out still verifies. Empty:
	// one key is generated per process (fine for one replica only).
	SigningKeys []string `yaml:"signing_keys"`
	// TokenTTL is the lifetime of a signed token. Default 5m.
	TokenTTL Duration `yaml:"token_ttl"`
}

// Vault configures where the gateway keeps the upstream tokens of users
// (auth mode user_oauth) and the consents that get them. Tokens live in
// the session store (sessions.store), encrypted.
type Vault struct {
	// Keys encrypt the tokens (AES-256-GCM): the first encrypts, every
	// one decrypts, so that a key can be rotated. Required when an
	// upstream uses user_oauth.
	Keys []VaultKey `yaml:"keys"`
	// ConsentTTL is how long a consent link, and the authorization it
	// starts, stay usable. Default 10m.
	ConsentTTL Duration `yaml:"consent_ttl"`
	// PendingPerPrincipal bounds the consents one principal has pending
	// (the oldest goes first). Default 8.
	PendingPerPrincipal int `yaml:"pending_per_principal" cfg:"positive"`
	// Pending bounds the consents pending in all. Default 10000.
	Pending int `yaml:"pending" cfg:"positive"`
	// PendingPerTenant bounds the consents one tenant's principals have
	// pending: its share of Pending. When Pending is reached, the tenant
	// holding the most loses its oldest. Default a quarter of Pending.
	PendingPerTenant int `yaml:"pending_per_tenant" cfg:"positive"`
	// TokensPerTenant bounds the users' tokens one tenant keeps, all
	// upstreams together. Default a tenth of Tokens (10000).
	TokensPerTenant int `yaml:"tokens_per_tenant" cfg:"positive"`
	// Tokens bounds the tokens the vault keeps in all. Default 100000.
	Tokens int `yaml:"tokens" cfg:"positive"`
	// DiscoveredIssuers, if set, are the only authorization servers
	// (issuer identifiers) the gateway accepts when an upstream's
	// protected resource metadata names its server (user_oauth without
	// auth.issuer). Empty: any https issuer on a public address.
	DiscoveredIssuers []string `yaml:"discovered_issuers"`
	// Login, if set, makes the person who opens a consent link sign in
	// at the gateway's own authorization server first: the link is
	// honoured only for the principal it was made for.
	Login *VaultLogin `yaml:"login"`
}

// VaultLogin is the gateway's client at one of its own issuers
// (auth.issuers), to sign in the person at a consent page.
type VaultLogin struct {
	// Issuer is the issuer_url of one of auth.issuers.
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecret are the gateway's client there; no secret
	// for a public client.
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret" cfg:"secret"`
	// Scopes are asked for with the token; it must pass auth's checks
	// (audience, required_scopes are not asked of it).
	Scopes []string `yaml:"scopes"`
}

// VaultKey is one key of the vault.
type VaultKey struct {
	// ID names the key in what it encrypted: letters, digits, '-' and
	// '_', at most 32.
	ID string `yaml:"id"`
	// Secret is 32 bytes, base64-encoded (standard or URL alphabet,
	// padded or not); typically ${VAR}.
	Secret string `yaml:"secret" cfg:"secret"`
}

// Upstream returns the upstream named name, or nil if there is none.
func (c *Config) Upstream(name string) *Upstream {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// Server configures the client-facing listener.
type Server struct {
	// Listen is the address of the MCP listener. Default ":8080".
	Listen string `yaml:"listen"`
	// PublicURL is this gateway's MCP endpoint as clients reach it; it is the
	// resource identifier for OAuth and the origin accepted by default.
	PublicURL string `yaml:"public_url"`
	// AllowedOrigins are Origin header values accepted besides none and the
	// origin of PublicURL.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AdminListen is the address of /metrics, /healthz, /readyz and the
	// console (see Admin). Empty: off.
	AdminListen string `yaml:"admin_listen"`
	// MaxBodyBytes bounds a POST body. Default 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes" cfg:"positive"`
	// RequestTimeout bounds one client request end to end, including a
	// streamed response. Default 5m.
	RequestTimeout Duration `yaml:"request_timeout"`
	// ReadHeaderTimeout bounds reading request headers. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadBodyTimeout bounds reading one request body, from the end of its
	// headers. Default 30s.
	ReadBodyTimeout Duration `yaml:"read_body_timeout"`
	// ListCacheTTL is how long an upstream's tool, prompt and resource lists
	// are served from the gateway's cache. Default 1m.
	ListCacheTTL Duration `yaml:"list_cache_ttl"`
	// DrainDelay is how long, after SIGTERM, the gateway keeps accepting
	// on the MCP listener while /readyz answers 503, so that load
	// balancers take it out of rotation first. Nil means the default, 5s;
	// an explicit 0 stops accepting at once.
	DrainDelay *Duration `yaml:"drain_delay"`
	// ShutdownGrace bounds the whole shutdown, from SIGTERM (drain delay
	// included) to exit: requests still in flight then are cut. It must
	// exceed DrainDelay. Default 25s, inside Kubernetes' default
	// terminationGracePeriodSeconds of 30.
	ShutdownGrace Duration `yaml:"shutdown_grace"`
}

// Sessions configures the session store.
type Sessions struct {
	// Store is "memory" (default) or "redis".
	Store string `yaml:"store"`
	// IdleTTL expires a session unused for this long. Default 30m.
	IdleTTL Duration `yaml:"idle_ttl"`
	// MaxSessions bounds the memory store; when it is full, a new session
	// evicts the least recently used one of the heaviest holder. Default
	// 100000.
	MaxSessions int `yaml:"max_sessions" cfg:"positive"`
	// MaxPerPrincipal bounds the live sessions of one principal (issuer,
	// subject, tenant), in either store. Default: a tenth of MaxSessions,
	// at most 100 (at least 1).
	MaxPerPrincipal int `yaml:"max_per_principal" cfg:"positive"`
	// MaxPerTenant bounds the live sessions of one tenant, in either store.
	// Default: half of MaxSessions, at most 10000 (at least 1).
	MaxPerTenant int `yaml:"max_per_tenant" cfg:"positive"`
	// MailboxMessages bounds the messages one mailbox holds. Default 64.
	MailboxMessages int `yaml:"mailbox_messages" cfg:"positive"`
	// MailboxBytes bounds the bytes one mailbox holds. Default 8 MiB.
	MailboxBytes int64 `yaml:"mailbox_bytes" cfg:"positive"`
	// Events bounds the log of SSE events kept so that clients can
	// resume their streams (Last-Event-ID).
	Events Events `yaml:"events"`
	// Redis configures the Redis store (store: redis).
	Redis Redis `yaml:"redis"`
	// Tasks bounds the tasks the gateway routes, kept in the same store.
	Tasks Tasks `yaml:"tasks"`
}

// Tasks bounds the records the gateway keeps of the tasks upstreams create
// for clients (2025-11-25 basic/utilities/tasks, the 2026-07-28 Tasks
// extension).
type Tasks struct {
	// MaxPerPrincipal bounds the live tasks of one principal. Default: a
	// tenth of MaxTasks, at most 100 (at least 1).
	MaxPerPrincipal int `yaml:"max_per_principal" cfg:"positive"`
	// MaxPerTenant bounds the live tasks of one tenant. Default: half of
	// MaxTasks, at most 10000 (at least 1).
	MaxPerTenant int `yaml:"max_per_tenant" cfg:"positive"`
	// MaxTasks bounds the memory store's tasks. Default 100000.
	MaxTasks int `yaml:"max_tasks" cfg:"positive"`
	// MaxTTL bounds how long a task is kept from its creation, whatever
	// ttl the upstream gives it. Default 1h.
	MaxTTL Duration `yaml:"max_ttl"`
	// ListPageSize is the most tasks one tasks/list page holds. Default 50.
	ListPageSize int `yaml:"list_page_size" cfg:"positive"`
}

// Events bounds the event log behind resumable streams (2025-11-25
// basic/transports, "Resumability and Redelivery"): each stream's recent
// events, in the session store (a ring in memory, a Redis Stream in Redis).
type Events struct {
	// PerStream bounds the events one stream's log keeps; older ones are
	// dropped. Default 1000.
	PerStream int `yaml:"per_stream" cfg:"positive"`
	// BytesPerStream bounds the bytes one stream's log keeps; older
	// events are dropped. Default 1 MiB.
	BytesPerStream int64 `yaml:"bytes_per_stream" cfg:"positive"`
	// TTL is how long a stream's log is kept after its last event.
	// Default 2m.
	TTL Duration `yaml:"ttl"`
	// StreamsPerSession bounds the logs one session keeps; opening one
	// more drops its oldest. Default 16.
	StreamsPerSession int `yaml:"streams_per_session" cfg:"positive"`
	// MaxStreams and MaxBytes bound all the logs of the memory store
	// (Redis is bounded by its maxmemory). Defaults 100000 and 256 MiB.
	MaxStreams int   `yaml:"max_streams" cfg:"positive"`
	MaxBytes   int64 `yaml:"max_bytes" cfg:"positive"`
	// MaxStreamsPerPrincipal and MaxBytesPerPrincipal are the shares of
	// MaxStreams and MaxBytes the logs of one principal's sessions hold
	// in the memory store; MaxStreamsPerTenant and MaxBytesPerTenant
	// those of one tenant's. Beyond a share, the holder's own least
	// recently written logs are dropped. Defaults: a tenth of the pool
	// for a principal, half for a tenant (at least 1).
	MaxStreamsPerPrincipal int   `yaml:"max_streams_per_principal" cfg:"positive"`
	MaxStreamsPerTenant    int   `yaml:"max_streams_per_tenant" cfg:"positive"`
	MaxBytesPerPrincipal   int64 `yaml:"max_bytes_per_principal" cfg:"positive"`
	MaxBytesPerTenant      int64 `yaml:"max_bytes_per_tenant" cfg:"positive"`
}

// Redis configures the Redis session store. One config serves a single
// server, Sentinel (MasterName set) and Cluster (several Addrs).
type Redis struct {
	// Addrs are host:port addresses. Default ["127.0.0.1:6379"].
	Addrs []string `yaml:"addrs"`
	// MasterName selects Sentinel mode.
	MasterName string `yaml:"master_name"`
	Username   string `yaml:"username"`
	// Password is a secret, ${VAR}-expanded like upstream headers; never
	// logged or printed.
	Password string `yaml:"password" cfg:"secret"`
	DB       int    `yaml:"db"`
	TLS      bool   `yaml:"tls"`
	// KeyPrefix prefixes every key the gateway writes. Default "mcpgw:".
	KeyPrefix string `yaml:"key_prefix" cfg:"nonempty=leave the key out for the default \"mcpgw:\""`
	// Timeout bounds each Redis command (dial, read, write). Default 500ms:
	// a request that needs session state fails fast when Redis is down.
	Timeout Duration `yaml:"timeout"`
}

// Auth configures how callers of the MCP endpoint are authenticated: the
// gateway is an OAuth 2.1 resource server that accepts JWT access tokens
// from the configured issuers.
type Auth struct {
	// Issuers are the trusted token issuers. At least one is required
	// unless Anonymous is set.
	Issuers []Issuer `yaml:"issuers"`
	// RequiredScopes must all be granted to every token.
	RequiredScopes []string `yaml:"required_scopes"`
	// Leeway is the clock skew tolerated on exp, nbf and iat. Default 30s.
	Leeway Duration `yaml:"leeway"`
	// TokenCacheSize bounds the cache of verified tokens (keyed by the
	// token's SHA-256, kept until the token expires). Default 10000.
	TokenCacheSize int `yaml:"token_cache_size" cfg:"positive"`
	// Anonymous serves without authentication: every caller is one
	// anonymous principal of tenant "default". For local development only;
	// it excludes Issuers.
	Anonymous bool `yaml:"anonymous"`
}

// Issuer is one trusted token issuer.
type Issuer struct {
	// Name identifies the issuer in logs and metrics: [a-z0-9-]+, unique.
	Name string `yaml:"name"`
	// IssuerURL must equal the tokens' iss claim; OIDC discovery starts
	// from it. https, or http on a loopback host.
	IssuerURL string `yaml:"issuer_url"`
	// Audiences are accepted aud values; a token must carry one of them.
	// Default: [server.public_url].
	Audiences []string `yaml:"audiences"`
	// TenantClaim is the claim holding the tenant id; a dotted path reaches
	// into nested objects ("org.tenant"). Exactly one of TenantClaim and
	// Tenant is set.
	TenantClaim string `yaml:"tenant_claim"`
	// Tenant assigns every token of this issuer to one tenant.
	Tenant string `yaml:"tenant"`
	// JWKSURL, if set, is where the signing keys are fetched, skipping
	// discovery.
	JWKSURL string `yaml:"jwks_url"`
	// Algorithms are the accepted signature algorithms, a subset of RS256,
	// PS256, ES256 and EdDSA. Default: all four.
	Algorithms []string `yaml:"algorithms"`
	// RequireATJWT accepts only tokens whose JOSE header typ is "at+jwt"
	// (RFC 9068 §4), for issuers that issue RFC 9068 access tokens.
	// Default false: IdPs that send "JWT" keep working.
	RequireATJWT bool `yaml:"require_at_jwt"`
}

// Tenant is one tenant: who may use which upstreams, and how.
type Tenant struct {
	// ID is the tenant id tokens carry: unique, non-empty.
	ID string `yaml:"id"`
	// Upstreams are the upstreams that exist for the tenant. nil (the key
	// absent) means every upstream, with no rules; an empty list means none.
	Upstreams []TenantUpstream `yaml:"upstreams" cfg:"ornone=leave the key out for every upstream, or write [] for none"`
	// Budgets are the tenant's own rate limits and quotas, on top of the
	// top-level budgets.
	Budgets TenantBudgets `yaml:"budgets"`
	// ToolSearch, if set, gives the tenant two tools of the gateway's own
	// to find and call its tools (progressive discovery), in place of its
	// tools or beside them.
	ToolSearch *ToolSearch `yaml:"tool_search"`
	// Policy is the tenant's ordered policy rules, before those of each
	// upstream (see [PolicyRule] and docs/policy.md).
	Policy []PolicyRule `yaml:"policy"`
	// Guards are the tenant's content guards, for every upstream it uses,
	// after each upstream's own (see [Guard] and docs/guards.md).
	Guards []Guard `yaml:"guards"`
}

// ToolSearch is a tenant's tool search.
type ToolSearch struct {
	// Mode is "replace" (the default: tools/list holds only the two
	// gateway tools) or "beside" (they are added to the list).
	Mode string `yaml:"mode"`
	// MaxResults bounds the definitions one search returns. Default 10,
	// at most MaxSearchResults; an explicit 0 is an error.
	MaxResults int `yaml:"max_results" cfg:"positive"`
}

// TenantUpstream is one upstream a tenant may use, and its rules.
type TenantUpstream struct {
	// Name names a configured upstream.
	Name      string `yaml:"name"`
	Tools     Rules  `yaml:"tools"`
	Prompts   Rules  `yaml:"prompts"`
	Resources Rules  `yaml:"resources"`
	// RequiredScopes maps a tool's original name to scopes a token must
	// also carry to call it, on top of auth.required_scopes.
	RequiredScopes map[string][]string `yaml:"required_scopes"`
	// Annotations are admin-asserted tool annotations, by the tool's
	// original name. They replace the upstream's in what the tenant is shown
	// and are the only annotations policy may rely on.
	Annotations map[string]ToolAnnotations `yaml:"annotations"`
	// Present says how the tenant is shown tools of the upstream, by the
	// tool's original name: under another name, with another
	// description, with arguments the admin fixes. Policy, budgets, audit
	// and metrics still name the tool by its original name.
	Present map[string]ToolPresentation `yaml:"present"`
	// Headers are added to the upstream's headers for this tenant's
	// requests, replacing those of the same name: the tenant's own
	// credentials for a shared upstream. Secrets, as the upstream's are.
	Headers map[string]string `yaml:"headers" cfg:"headers"`
	// Auth overrides the upstream's auth for this tenant, key by key: a
	// key set here replaces the upstream's, the others stay.
	Auth *UpstreamAuth `yaml:"auth"`
	// Env is added to a stdio upstream's env for this tenant's processes,
	// replacing the variables of the same name. Secrets, as the
	// upstream's are.
	Env map[string]string `yaml:"env" cfg:"headers"`
	// Policy is the upstream's policy rules for this tenant, after the
	// tenant's own (see [PolicyRule]).
	Policy []PolicyRule `yaml:"policy"`
	// Guards are content guards on this upstream for this tenant, after
	// the upstream's and the tenant's own (see [Guard]).
	Guards []Guard `yaml:"guards"`
}

// Budgets are the budgets on work. The top-level budgets apply to every
// tenant, each with counters of its own; a tenant's own budgets are added
// to them, and one of a tenant's rules replaces the default of the same
// name.
type Budgets struct {
	// TimeZone is the IANA time zone whose midnights (day) and firsts of
	// the month (month) reset quotas. Empty: UTC. Top level only.
	TimeZone string `yaml:"time_zone"`
	// RateLimits bound requests per interval, with a burst (GCRA).
	RateLimits []RateLimit `yaml:"rate_limits"`
	// Quotas bound tools/call requests per day or month.
	Quotas []Quota `yaml:"quotas"`
	// Redis, if set, is where budgets are counted. nil: in the session
	// store's Redis (sessions.store: redis), else in process.
	Redis *Redis `yaml:"redis"`
}

// TenantBudgets are a tenant's own budgets (see [Budgets]).
type TenantBudgets struct {
	RateLimits []RateLimit `yaml:"rate_limits"`
	Quotas     []Quota     `yaml:"quotas"`
}

// Dimensions of a rate limit's counter (RateLimit.Per), besides the
// tenant, which is always one.
const (
	PerPrincipal = "principal"
	PerUpstream  = "upstream"
	PerTool      = "tool"
)

// What a budget does when its store (Redis) fails (OnStoreError).
const (
	FailOpen   = "open"
	FailClosed = "closed"
)

// Quota periods (Quota.Period).
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
)

// RateLimit is one rate limit: at most Requests per Interval, with bursts
// of up to Burst, per tenant and per each dimension in Per. A rule that
// names no upstream or tool (in Upstreams, Tools or Per) counts every HTTP
// request to the MCP endpoint and is enforced before the body is read; the
// others count the requests routed to a matching upstream (tools/call,
// prompts/get, resources/read, completion/complete, resources/subscribe)
// or, with Tools or Per tool, the tools/call of matching tools.
type RateLimit struct {
	// Name names the budget in errors, metrics and the audit log:
	// [a-z0-9-]+, unique among the rules that apply to one tenant.
	Name string `yaml:"name"`
	// Per lists what else the counter is kept per: "principal",
	// "upstream", "tool". Empty: one counter for the whole tenant.
	Per []string `yaml:"per"`
	// Upstreams and Tools are glob patterns on upstream names and on
	// tools' original names; the rule applies only to requests that match.
	// nil: any.
	Upstreams []string `yaml:"upstreams"`
	Tools     []string `yaml:"tools"`
	// Requests per Interval (default 1s) in the long run, with up to
	// Burst (default Requests) at once.
	Requests int      `yaml:"requests" cfg:"positive"`
	Interval Duration `yaml:"interval"`
	Burst    int      `yaml:"burst" cfg:"positive"`
	// OnStoreError is "open" (default: the request is served when Redis
	// cannot be asked) or "closed" (it is refused).
	OnStoreError string `yaml:"on_store_error"`
}

// Quota is one quota: at most Calls tools/call requests per Period, per
// tenant, counting the calls of matching upstreams and tools together.
type Quota struct {
	// Name: as RateLimit.Name.
	Name string `yaml:"name"`
	// Upstreams and Tools: as in RateLimit. A quota per tool is a quota
	// whose Tools name that tool.
	Upstreams []string `yaml:"upstreams"`
	Tools     []string `yaml:"tools"`
	Calls     int64    `yaml:"calls" cfg:"positive"`
	// Period is "day" (default) or "month", in budgets.time_zone.
	Period string `yaml:"period"`
	// OnStoreError is "closed" (default: the call is refused when Redis
	// cannot be asked) or "open".
	OnStoreError string `yaml:"on_store_error"`
}

// Rules select items by glob patterns (path.Match syntax) on the upstream's
// original names or URIs. Deny wins over Allow; a nil Allow means every
// item.
type Rules struct {
	Allow []string `yaml:"allow" cfg:"ornone=leave the key out to allow everything, or write [] to allow nothing"`
	Deny  []string `yaml:"deny"`
}

// ToolPresentation is how one tenant is shown one tool.
type ToolPresentation struct {
	// Alias is the whole name the tenant's clients see and call the tool
	// by, instead of its exposed name (which the tenant then does not
	// see): at most 64 characters of A-Z, a-z, 0-9, "_", "-" and ".",
	// unique among the tenant's aliases. Empty: the exposed name.
	Alias string `yaml:"alias"`
	// Description, if set, replaces the upstream's description.
	Description *string `yaml:"description"`
	// FixedArguments are arguments the admin sets, by name, as string
	// values: they are removed from the inputSchema (properties and
	// required) the tenant sees, set on every call, and a call that sets
	// one itself is refused.
	FixedArguments map[string]string `yaml:"fixed_arguments"`
}

// ToolAnnotations are the MCP tool annotations an admin may assert. Unset
// fields are not asserted.
type ToolAnnotations struct {
	Title           *string `yaml:"title" json:"title,omitempty"`
	ReadOnlyHint    *bool   `yaml:"readOnlyHint" json:"readOnlyHint,omitempty"`
	DestructiveHint *bool   `yaml:"destructiveHint" json:"destructiveHint,omitempty"`
	IdempotentHint  *bool   `yaml:"idempotentHint" json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool   `yaml:"openWorldHint" json:"openWorldHint,omitempty"`
}

// Values of upstreams[].transport.
const (
	TransportHTTP  = "streamable_http"
	TransportSSE   = "sse"
	TransportAuto  = "auto"
	TransportStdio = "stdio"
	// TransportOpenAPI is a REST API described by an OpenAPI document,
	// whose operations the gateway serves as tools (see UpstreamOpenAPI).
	TransportOpenAPI = "openapi"
)

// Values of upstreams[].stdio.isolation.
const (
	IsolationTenant  = "tenant"
	IsolationShared  = "shared"
	IsolationSession = "session"
)

// The upstream authentication modes (Upstream.Auth.Mode).
const (
	AuthClientCredentials = "client_credentials"
	AuthTokenExchange     = "token_exchange"
	AuthSignedIdentity    = "signed_identity"
	AuthUserOAuth         = "user_oauth"
)

// Limits bound what one client or one upstream can make the gateway hold.
// Every one is live on reload.
type Limits struct {
	// StreamsPerPrincipal bounds the server-to-client streams (GET streams
	// and subscriptions/listen) one principal holds open on one replica.
	// Default 32.
	StreamsPerPrincipal int `yaml:"streams_per_principal" cfg:"positive"`
	// StreamsPerTenant bounds those of one tenant on one replica. Default
	// 10000.
	StreamsPerTenant int `yaml:"streams_per_tenant" cfg:"positive"`
	// BatchMessages bounds the messages in one JSON-RPC batch. Default 50.
	BatchMessages int `yaml:"batch_messages" cfg:"positive"`
	// ClientInfoBytes bounds an initialize's clientInfo. Default 8 KiB.
	ClientInfoBytes int `yaml:"client_info_bytes" cfg:"positive"`
	// ClientCapabilitiesBytes bounds a client's capabilities (initialize,
	// or a 2026-07-28 request's _meta). Default 64 KiB.
	ClientCapabilitiesBytes int `yaml:"client_capabilities_bytes" cfg:"positive"`
	// ParkedCallsPerPrincipal bounds the calls of one principal left
	// waiting, on one replica, for a 2026-07-28 client's answer to an
	// upstream's request for input (input_required). Default 16.
	ParkedCallsPerPrincipal int `yaml:"parked_calls_per_principal" cfg:"positive"`
	// DetachedCallsPerPrincipal bounds the calls of one principal that go
	// on, on one replica, after their client hung up from a resumable
	// stream (the events go to the event log for a resume); beyond it, a
	// hang-up cancels the call. Default 16.
	DetachedCallsPerPrincipal int `yaml:"detached_calls_per_principal" cfg:"positive"`
	// DetachedCallsPerTenant bounds those of one tenant on one replica.
	// Default a quarter of DetachedCalls.
	DetachedCallsPerTenant int `yaml:"detached_calls_per_tenant" cfg:"positive"`
	// DetachedCalls bounds those of all principals on one replica.
	// Default 1024.
	DetachedCalls int `yaml:"detached_calls" cfg:"positive"`
	// ListPages bounds the pages of one upstream list. Default 100.
	ListPages int `yaml:"list_pages" cfg:"positive"`
	// ListBytes bounds the bytes of one upstream list, all pages together.
	// Default 16 MiB.
	ListBytes int64 `yaml:"list_bytes" cfg:"positive"`
	// StdioProcesses bounds the processes of all stdio upstreams together
	// on one replica. Default 256.
	StdioProcesses int `yaml:"stdio_processes" cfg:"positive"`
	// StdioProcessesPerPrincipal and StdioProcessesPerTenant bound the
	// processes of all stdio upstreams one principal and one tenant start
	// of StdioProcesses. nil means a quarter and a half of StdioProcesses
	// (at least 1); 0 means no bound but StdioProcesses.
	StdioProcessesPerPrincipal *int `yaml:"stdio_processes_per_principal"`
	StdioProcessesPerTenant    *int `yaml:"stdio_processes_per_tenant"`
	// UpstreamStreams bounds the upstream GET streams one replica holds
	// open for its client sessions' GET streams (see dispatch/listen.go).
	// Default 10000.
	UpstreamStreams int `yaml:"upstream_streams" cfg:"positive"`
	// UpstreamStreamsPerPrincipal bounds those one principal holds on one
	// replica. Default a sixteenth of UpstreamStreams.
	UpstreamStreamsPerPrincipal int `yaml:"upstream_streams_per_principal" cfg:"positive"`
	// UpstreamStreamsPerTenant bounds those one tenant holds on one
	// replica. Default half of UpstreamStreams.
	UpstreamStreamsPerTenant int `yaml:"upstream_streams_per_tenant" cfg:"positive"`
}

// Telemetry configures traces, the audit log and the admin listener's
// debugging endpoints. Metrics are always on (served at admin /metrics).
type Telemetry struct {
	Tracing Tracing `yaml:"tracing"`
	Audit   Audit   `yaml:"audit"`
	// Pprof serves net/http/pprof on the admin listener. Default false.
	Pprof bool `yaml:"pprof"`
}

// Tracing configures OpenTelemetry traces. The standard OTEL_* environment
// variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME,
// OTEL_TRACES_SAMPLER, ...) apply and win over the defaults here.
type Tracing struct {
	// Enabled turns tracing on. Default false; OTEL_SDK_DISABLED=true wins.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP/HTTP endpoint ("http://collector:4318"), used
	// when OTEL_EXPORTER_OTLP_ENDPOINT is unset.
	Endpoint string `yaml:"endpoint"`
	// SampleRatio is the parent-based ratio sampler's ratio, 0 to 1.
	// Default 1.
	SampleRatio *float64 `yaml:"sample_ratio" cfg:"ratio"`
}

// Audit configures the audit log: one JSON record per tool call, prompt
// get, resource read, auth failure and policy denial.
type Audit struct {
	// Output is "stderr" (default), "stdout", "off", or a file path
	// (appended to).
	Output string `yaml:"output" cfg:"nonempty=leave the key out for \"stderr\", or write \"off\""`
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("30s", "1m30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d in time.Duration's format, such as "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText encodes d as a Go duration string, so that YAML and JSON
// output reads "30s" rather than a count of nanoseconds.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a Go duration string such as "30s".
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// StdioShares returns the processes of all stdio upstreams one principal
// and one tenant start (call after ApplyDefaults): as set, or derived from
// StdioProcesses (see [ProcessShares]).
func (l *Limits) StdioShares() (principal, tenant int) {
	return shares(l.StdioProcesses, l.StdioProcessesPerPrincipal, l.StdioProcessesPerTenant)
}
