package console

import (
	"context"
	"time"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/explain"
)

// A Source is everything the console reads: the gateway implements it over
// its parts, tests with a fake. Each method returns plain values the
// console only renders; none holds a secret, a token or an argument value.
type Source interface {
	Overview(ctx context.Context) Overview
	Upstreams(ctx context.Context) []Upstream
	// Tenants returns the configured tenant ids, and Issuers the names of
	// the configured token issuers (for the claims preview).
	Tenants() []string
	Issuers() []string
	// Explain returns what tenant sees of every upstream and why, as
	// gateway explain decides it (it asks the upstreams).
	// Explain is what gateway explain reports of tenant; with claims (a
	// token's, previewed), as that principal, its policy rules applied.
	Explain(ctx context.Context, tenant string, claims map[string]any) (*explain.Report, error)
	// Preview returns the tenant and scopes a token of the named issuer
	// carrying claims would have.
	Preview(issuer string, claims map[string]any) (Preview, error)
	Budgets(ctx context.Context) []Budget
	Vault(ctx context.Context) Vault
	// Unlink revokes and deletes u's token, as gateway tokens revoke
	// does, and records that operator did so in the audit log. It
	// reports whether there was a token.
	Unlink(ctx context.Context, operator string, u VaultUser) (bool, error)
	// Audit returns up to n of the last audit records that f keeps,
	// newest first.
	Audit(n int, f AuditFilter) []audit.Record
}

// Overview is the overview page.
type Overview struct {
	Version string
	Started time.Time
	// Generation is the config generation in force, loaded at Loaded.
	Generation int
	Loaded     time.Time
	// ReloadErrors are the problems of the last reload that failed, if it
	// failed after the last one that succeeded, at ReloadFailed.
	ReloadErrors []string
	ReloadFailed time.Time
	// NotReady lists what keeps the gateway from serving (/readyz).
	NotReady []string
	// Sessions and Streams are the sessions and client streams open on
	// this replica; -1 when unknown.
	Sessions, Streams int
	// PerTenant are the counts kept per tenant: every configured tenant,
	// and any other that holds or was refused something.
	PerTenant []TenantCounts
	Circuits  []Circuit
}

// TenantCounts are what a tenant holds and was refused on this replica.
type TenantCounts struct {
	Tenant string
	// Sessions are the tenant's sessions in the session store; -1 when
	// the store does not count them per tenant (Redis without session
	// bounds).
	Sessions int
	// Streams are the GET streams of the tenant's sessions open on this
	// replica.
	Streams int
	// Rejections are requests refused at a limit, by limit.
	Rejections map[string]int64
	// Refusals are requests refused by a budget, by budget.
	Refusals map[string]int64
}

// A Circuit is an upstream's circuit breaker.
type Circuit struct {
	Upstream string
	State    string // closed, open, half-open
}

// Upstream is one upstream on the upstreams page.
type Upstream struct {
	Name, Transport string
	// Reachable: its last request succeeded; Tried false: none was sent
	// yet. LastError is the last request's error when it failed.
	Reachable, Tried bool
	LastError        string
	// Circuit is its breaker's state; "" without a breaker.
	Circuit string
	// Credentials is how the gateway authenticates to it: a mode, never
	// a credential.
	Credentials string
	// InFlight and Waiting are the requests its concurrency gate holds
	// and queues; MaxInFlight its bound (0: no gate).
	InFlight, Waiting, MaxInFlight int
	// Pinned: its definitions are checked against pins; Pins are those
	// that do not match.
	Pinned bool
	Pins   []Pin
	// Lists are its listings this replica caches, by kind.
	Lists []List
	// Stdio is set for a stdio upstream, with what its processes did on
	// this replica since its config last changed: Processes run now;
	// Started were started, Exits ended by themselves (exited, crashed),
	// Restarts were started again after such an end.
	Stdio                    bool
	Processes                int
	Started, Exits, Restarts int64
}

// A List is what this replica caches of an upstream's list of one kind.
type List struct {
	Kind string // tools, prompts, resources, resource templates
	// Listings are the listings cached: one per tenant, identity or
	// session that asked, as the upstream's lists are shared. Items is
	// how many items the newest holds, fetched at Fetched; a zero Fetched
	// means they are all stale (the upstream said the list changed) and
	// are fetched again on their next use.
	Listings, Items int
	Fetched         time.Time
}

// A Pin is a tool or prompt whose definition does not match its pin.
type Pin struct {
	Kind, Name string
	// New: not in the pins file; else Changed names the fields that
	// differ.
	New         bool
	Changed     []string
	Quarantined bool
}

// Preview is what a subject's claims give.
type Preview struct {
	Issuer, Tenant string
	Scopes         []string
	// Known: the gateway serves the tenant.
	Known bool
}

// A Budget is one budget of one tenant, or an upstream's concurrency.
type Budget struct {
	Tenant, Kind, Name, Detail string
	// Used and Limit are the current count and the bound; Used is -1
	// when this replica has not seen it.
	Used, Limit int64
	// Refused counts the requests it refused on this replica.
	Refused int64
}

// Vault is the vault page.
type Vault struct {
	// Enabled: some upstream uses user_oauth.
	Enabled bool
	// Error, if not "", is why the vault could not be read.
	Error     string
	Upstreams []VaultUpstream
}

// VaultUpstream is the users linked to one upstream.
type VaultUpstream struct {
	Upstream string
	Users    int
	// Linked are its users, when the console may unlink them: sorted, at
	// most VaultUsersMax; More counts those left out.
	Linked []VaultUser
	More   int
}

// AuditFilter selects audit records: an empty field matches any.
type AuditFilter struct {
	Tenant, Outcome string
}
