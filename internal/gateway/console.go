package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mcpgw/gateway/internal/audit"
	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/console"
	"github.com/mcpgw/gateway/internal/explain"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/vault"
)

// consoleAuditRecords is how many audit records the console's ring keeps:
// enough for a look at what just happened, a few hundred KiB at most.
const consoleAuditRecords = 1000

// consoleState is what the gateway keeps for its console beyond what its
// parts hold: when it started, and the last audit records.
type consoleState struct {
	started time.Time
	ring    *audit.Ring
}

// newConsoleState returns the console's state and the audit logger that
// also fills its ring (a, or the ring alone when a is nil: the console
// shows recent records even with the audit log off).
func newConsoleState(a *audit.Logger) (*consoleState, *audit.Logger) {
	cs := &consoleState{started: time.Now(), ring: audit.NewRing(consoleAuditRecords)}
	return cs, a.Tee(cs.ring)
}

// consoleHandler serves the console under console.Path.
func (g *Gateway) consoleHandler() http.Handler {
	return console.New(console.Options{Source: consoleSource{g}, Access: g.consoleAccess, Logger: g.log, HTTPClient: g.opts.IdPClient})
}

// consoleAccess is who may read the console under the config in force: the
// bearer's holders, or those its OpenID provider signs in, when
// admin.console.auth is set; else requests on
// loopback when the admin listener is there (or when there is none of the
// gateway's own: an embedder or a test serves AdminHandler where it
// likes, and the console still checks each request's address).
func (g *Gateway) consoleAccess() console.Access {
	cfg := g.Config()
	acc := console.Access{VaultUnlink: cfg.Admin.Console.VaultUnlink}
	switch a := cfg.Admin.Console.Auth; {
	case a != nil && a.OIDC != nil:
		acc.OIDC = a.OIDC
	case a != nil && a.Bearer != "":
		acc.Bearer = a.Bearer
	default:
		acc.Loopback = cfg.Server.AdminListen == "" || config.LoopbackAddr(cfg.Server.AdminListen)
	}
	return acc
}

// consoleSource is the console's view of the gateway.
type consoleSource struct{ g *Gateway }

// metricValues returns the values of the gathered metric named name, by
// their labels.
func metricValues(fams []*dto.MetricFamily, name string) []labeled {
	var out []labeled
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labeled{labels: map[string]string{}}
			for _, p := range m.GetLabel() {
				l.labels[p.GetName()] = p.GetValue()
			}
			switch {
			case m.Counter != nil:
				l.value = m.GetCounter().GetValue()
			case m.Gauge != nil:
				l.value = m.GetGauge().GetValue()
			}
			out = append(out, l)
		}
	}
	return out
}

type labeled struct {
	labels map[string]string
	value  float64
}

// single returns the value of an unlabelled metric, -1 when absent.
func single(fams []*dto.MetricFamily, name string) int {
	if vs := metricValues(fams, name); len(vs) == 1 {
		return int(vs[0].value)
	}
	return -1
}

// noTenant names the tenant "" on the console.
const noTenant = "(none)"

func (s consoleSource) Overview(ctx context.Context) console.Overview {
	g := s.g
	o := console.Overview{Version: cmp.Or(g.opts.Version, "dev"), Started: g.console.started}
	g.reload.mu.Lock()
	o.Generation, o.Loaded = g.reload.generation, g.reload.loaded
	if err := g.reload.lastErr; err != nil {
		o.ReloadFailed = g.reload.lastErrAt
		var ps config.Problems
		if errors.As(err, &ps) {
			for _, p := range ps {
				o.ReloadErrors = append(o.ReloadErrors, p.Error())
			}
		} else {
			o.ReloadErrors = []string{err.Error()}
		}
	}
	g.reload.mu.Unlock()
	o.NotReady = g.Ready(ctx)
	fams, _ := g.metrics.Gather()
	o.Sessions = single(fams, "mcpgw_sessions_active")
	o.Streams = single(fams, "mcpgw_sse_streams_open")
	per := map[string]*console.TenantCounts{}
	of := func(t string) *console.TenantCounts {
		t = cmp.Or(t, noTenant)
		if per[t] == nil {
			per[t] = &console.TenantCounts{Tenant: t, Rejections: map[string]int64{}, Refusals: map[string]int64{}}
		}
		return per[t]
	}
	for _, v := range metricValues(fams, "mcpgw_limit_rejections_total") {
		of(v.labels["tenant"]).Rejections[v.labels["limit"]] += int64(v.value)
	}
	for _, v := range metricValues(fams, "mcpgw_budget_refusals_total") {
		of(v.labels["tenant"]).Refusals[v.labels["budget"]+" "+v.labels["name"]] += int64(v.value)
	}
	for _, t := range s.Tenants() {
		of(t)
	}
	// Sessions per tenant from the store: the memory store counts them;
	// a Redis store has them in its per-tenant count sets, kept when a
	// per-principal or per-tenant bound is set (the default), for the
	// configured tenants.
	var sessions map[string]int
	switch c := g.stores.Sessions.(type) {
	case interface{ Tenants() map[string]int }:
		sessions = c.Tenants()
	case interface {
		TenantCounts(context.Context, []string) (map[string]int, error)
	}:
		var err error
		if sessions, err = c.TenantCounts(ctx, append(s.Tenants(), "")); err != nil {
			g.log.Warn("console: counting sessions per tenant", "error", err)
			sessions = nil
		}
	}
	for t, n := range sessions {
		if n > 0 || t != "" {
			of(t)
		}
	}
	streams := g.edge.StreamsByTenant()
	for t := range streams {
		of(t)
	}
	for t, c := range per {
		if t == noTenant {
			t = ""
		}
		c.Sessions, c.Streams = -1, streams[t]
		if sessions != nil {
			c.Sessions = sessions[t]
		}
	}
	for _, t := range per {
		o.PerTenant = append(o.PerTenant, *t)
	}
	slices.SortFunc(o.PerTenant, func(a, b console.TenantCounts) int { return cmp.Compare(a.Tenant, b.Tenant) })
	for _, u := range g.server.UpstreamStates() {
		if u.Circuit != "" {
			o.Circuits = append(o.Circuits, console.Circuit{Upstream: u.Name, State: u.Circuit})
		}
	}
	return o
}

func (s consoleSource) Upstreams(context.Context) []console.Upstream {
	cfg := s.g.server.Current().Config()
	states := s.g.server.UpstreamStates()
	pins := s.g.server.PinMismatches()
	var out []console.Upstream
	for i, u := range cfg.Upstreams {
		cu := console.Upstream{Name: u.Name, Transport: cmp.Or(u.Transport, config.TransportHTTP), Credentials: credentialMode(cfg, &u), Pinned: u.Pin != nil}
		switch {
		case u.IsStdio():
			cu.Transport = config.TransportStdio
		case u.IsOpenAPI():
			cu.Transport = config.TransportOpenAPI
		}
		if c := u.Concurrency; c != nil {
			cu.MaxInFlight = c.MaxInFlight
		}
		if i < len(states) && states[i].Name == u.Name {
			st := states[i]
			cu.Tried, cu.Reachable, cu.Circuit = st.Tried, st.LastError == nil, st.Circuit
			if st.LastError != nil {
				cu.LastError = st.LastError.Error()
			}
			cu.InFlight, cu.Waiting = st.InFlight, st.Waiting
		}
		if i < len(states) && states[i].Name == u.Name {
			st := states[i]
			if ps := st.Processes; ps != nil {
				cu.Stdio, cu.Processes = true, ps.Running
				cu.Started, cu.Exits, cu.Restarts = ps.Started, ps.Exited, ps.Restarts
			}
			for _, l := range st.Lists {
				cu.Lists = append(cu.Lists, console.List{Kind: l.Kind.Info().Noun + "s", Listings: l.Listings, Items: l.Items, Fetched: l.Fetched})
			}
		}
		for _, p := range pins {
			if p.Upstream == u.Name {
				cu.Pins = append(cu.Pins, console.Pin{Kind: p.Kind.Info().Noun, Name: p.Name, New: p.New, Changed: p.Changed, Quarantined: p.Quarantined})
			}
		}
		out = append(out, cu)
	}
	return out
}

// credentialMode names how the gateway authenticates to u: the auth mode,
// or static headers (by count, never a value), and whether tenants
// override it.
func credentialMode(cfg *config.Config, u *config.Upstream) string {
	mode := "none"
	switch {
	case u.Auth != nil && u.Auth.Mode != "":
		mode = u.Auth.Mode
	case len(u.Headers) > 0:
		mode = fmt.Sprintf("static headers (%d)", len(u.Headers))
	}
	n := 0
	for _, tu := range cfg.TenantCredentials(u.Name) {
		if tu.Auth != nil || len(tu.Headers) > 0 || len(tu.Env) > 0 {
			n++
		}
	}
	if n > 0 {
		mode += fmt.Sprintf("; %d tenants have their own", n)
	}
	return mode
}

func (s consoleSource) Tenants() []string {
	cfg := s.g.Config()
	if len(cfg.Tenants) == 0 {
		return []string{tenant.DefaultID}
	}
	ids := make([]string, 0, len(cfg.Tenants))
	for _, t := range cfg.Tenants {
		ids = append(ids, t.ID)
	}
	return ids
}

func (s consoleSource) Issuers() []string {
	var names []string
	for _, is := range s.g.Config().Auth.Issuers {
		names = append(names, is.Name)
	}
	return names
}

func (s consoleSource) Explain(ctx context.Context, id string, claims map[string]any) (*explain.Report, error) {
	opts := explain.Options{HTTPClient: s.g.opts.HTTPClient, Logger: s.g.log}
	if claims != nil {
		// The previewed principal: its policy rules apply too.
		p := &policy.Principal{Claims: claims}
		p.Subject, _ = claims["sub"].(string)
		if sc, ok := claims["scope"].(string); ok {
			p.Scopes = strings.Fields(sc)
		}
		opts.Principal = p
	}
	return explain.Tenant(ctx, s.g.Config(), id, opts)
}

func (s consoleSource) Preview(issuer string, claims map[string]any) (console.Preview, error) {
	cfg := s.g.Config()
	for i := range cfg.Auth.Issuers {
		ic := &cfg.Auth.Issuers[i]
		if ic.Name != issuer {
			continue
		}
		t, scopes := auth.TenantOfClaims(ic, claims)
		_, err := s.g.server.Current().Tenants().Get(t)
		return console.Preview{Issuer: issuer, Tenant: t, Scopes: scopes, Known: t != "" && err == nil}, nil
	}
	if cfg.Auth.Anonymous {
		return console.Preview{}, errors.New("auth.anonymous: every caller is the anonymous principal of tenant " + tenant.DefaultID)
	}
	return console.Preview{}, fmt.Errorf("no issuer named %q", issuer)
}

func (s consoleSource) Budgets(context.Context) []console.Budget {
	cfg := s.g.Config()
	fams, _ := s.g.metrics.Gather()
	used := map[[2]string]int64{}
	for _, v := range metricValues(fams, "mcpgw_quota_used") {
		used[[2]string{v.labels["tenant"], v.labels["quota"]}] = int64(v.value)
	}
	refused := map[[3]string]int64{}
	for _, v := range metricValues(fams, "mcpgw_budget_refusals_total") {
		refused[[3]string{v.labels["tenant"], v.labels["budget"], v.labels["name"]}] += int64(v.value)
	}
	plans := budget.Compile(cfg)
	var out []console.Budget
	for _, id := range s.Tenants() {
		p := plans.Tenant(id)
		if p == nil {
			continue
		}
		for _, r := range slices.Concat(p.Edge, p.Calls) {
			out = append(out, console.Budget{Tenant: id, Kind: "rate_limit", Name: r.Name, Detail: r.Detail, Used: -1, Refused: refused[[3]string{id, "rate_limit", r.Name}]})
		}
		for _, q := range p.Quotas {
			b := console.Budget{Tenant: id, Kind: "quota", Name: q.Name, Detail: q.Detail, Used: -1, Limit: q.Limit(), Refused: refused[[3]string{id, "quota", q.Name}]}
			if n, ok := used[[2]string{id, q.Name}]; ok {
				b.Used = n
			}
			out = append(out, b)
		}
	}
	states := s.g.server.UpstreamStates()
	for i, u := range cfg.Upstreams {
		if u.Concurrency == nil || i >= len(states) {
			continue
		}
		var n int64
		for k, v := range refused {
			if k[1] == "concurrency" && k[2] == u.Name {
				n += v
			}
		}
		out = append(out, console.Budget{Kind: "concurrency", Name: u.Name, Detail: fmt.Sprintf("%d waiting", states[i].Waiting),
			Used: int64(states[i].InFlight), Limit: int64(u.Concurrency.MaxInFlight), Refused: n})
	}
	return out
}

func (s consoleSource) Vault(ctx context.Context) console.Vault {
	cfg := s.g.Config()
	var names []string
	for _, u := range cfg.Upstreams {
		if usesUserOAuth(cfg, &u) {
			names = append(names, u.Name)
		}
	}
	v := s.g.server.Broker().Vault()
	if len(names) == 0 || v == nil {
		return console.Vault{}
	}
	out := console.Vault{Enabled: true}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	infos, err := v.List(ctx, vault.Filter{})
	if err != nil {
		out.Error = err.Error()
	}
	users := map[string]map[string]bool{}
	for _, in := range infos {
		if users[in.Upstream] == nil {
			users[in.Upstream] = map[string]bool{}
		}
		users[in.Upstream][vault.Principal{Issuer: in.Issuer, Subject: in.Subject, Tenant: in.Tenant}.Hash()] = true
	}
	for _, n := range names {
		vu := console.VaultUpstream{Upstream: n, Users: len(users[n])}
		if cfg.Admin.Console.VaultUnlink {
			vu.Linked, vu.More = linkedUsers(infos, n)
		}
		out.Upstreams = append(out.Upstreams, vu)
	}
	return out
}

// linkedUsers returns the users of infos linked to upstream, sorted, at
// most console.VaultUsersMax, and how many more there are.
func linkedUsers(infos []vault.Info, upstream string) ([]console.VaultUser, int) {
	var us []console.VaultUser
	for _, in := range infos {
		if in.Upstream == upstream {
			us = append(us, console.VaultUser{Upstream: upstream, Issuer: in.Issuer, Tenant: in.Tenant, Subject: in.Subject})
		}
	}
	slices.SortFunc(us, func(a, b console.VaultUser) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Subject, b.Subject), cmp.Compare(a.Issuer, b.Issuer))
	})
	us = slices.CompactFunc(us, func(a, b console.VaultUser) bool { return a == b })
	if len(us) > console.VaultUsersMax {
		return us[:console.VaultUsersMax], len(us) - console.VaultUsersMax
	}
	return us, 0
}

// Unlink revokes and deletes u's token as gateway tokens revoke does
// (credentials.Broker.Revoke), and writes one audit record of it, naming
// operator; never the token.
func (s consoleSource) Unlink(ctx context.Context, operator string, u console.VaultUser) (bool, error) {
	if !s.g.Config().Admin.Console.VaultUnlink {
		return false, errors.New("admin.console.vault_unlink is off")
	}
	k := vault.Key{Principal: vault.Principal{Issuer: u.Issuer, Subject: u.Subject, Tenant: u.Tenant}, Upstream: u.Upstream}
	found, err := s.g.server.Broker().Revoke(ctx, k)
	r := audit.Record{Event: audit.EventVaultUnlink, Tenant: u.Tenant, Subject: u.Subject, Upstream: u.Upstream, Operator: operator, Outcome: audit.OutcomeOK}
	switch {
	case err != nil:
		r.Outcome, r.Reason = audit.OutcomeError, "vault unavailable"
	case !found:
		r.Reason = "no token"
	}
	s.g.opts.Audit.Record(ctx, r)
	return found, err
}

// usesUserOAuth reports whether u, or a tenant's override of it, reaches
// it with each user's own token.
func usesUserOAuth(cfg *config.Config, u *config.Upstream) bool {
	if u.Auth != nil && u.Auth.Mode == config.AuthUserOAuth {
		return true
	}
	for _, tu := range cfg.TenantCredentials(u.Name) {
		if tu.Auth != nil && tu.Auth.Mode == config.AuthUserOAuth {
			return true
		}
	}
	return false
}

func (s consoleSource) Audit(n int, f console.AuditFilter) []audit.Record {
	return s.g.console.ring.Last(n, func(r *audit.Record) bool {
		return (f.Tenant == "" || r.Tenant == f.Tenant) && (f.Outcome == "" || r.Outcome == f.Outcome)
	})
}
