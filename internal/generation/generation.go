// Package generation builds what one configuration is served with: a
// State holding the config, its tenants, each upstream's client,
// credentials and guards, the budgets, the policy rules, the content guards
// and the signer of identity tokens.
//
// A reload goes provision → validate → swap → clean up. Prepare builds
// what of a config can fail (the signing keys, the vault's keys, the
// policy and guard rules) and changes nothing shared: a config it refuses
// leaves the gateway as it was. Build, which cannot fail, makes the State
// from what Prepare made, reusing the previous State's upstreams whose
// config is unchanged (and so their connections and cached lists). The
// caller swaps the new State in, then Release ends what only the old one
// held. Requests in flight finish with the State they started with: a
// State is never changed once built.
package generation

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/mcpgw/gateway/internal/announce"
	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/identity"
	"github.com/mcpgw/gateway/internal/pipe"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/telemetry"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Shared is what every generation is built with and what outlives them:
// set once, by the gateway's assembly.
type Shared struct {
	// Version is the gateway's, announced to upstreams in clientInfo.
	Version string
	// Guards keep each upstream's concurrency gate and circuit breaker
	// across generations while their settings are unchanged.
	Guards *budget.Guards
	// Broker is user_oauth's: each generation applies its settings.
	Broker *credentials.Broker
	// Processes bounds the processes of all stdio upstreams.
	Processes *pipe.Limit
	// HTTPClient sends upstream requests (nil: each upstream its own);
	// AuthClient talks to authorization servers.
	HTTPClient, AuthClient *http.Client
	Metrics                *telemetry.Metrics
	Log                    *slog.Logger
}

// An Upstream is one configured upstream and its client.
type Upstream struct {
	Cfg    config.Upstream
	Cat    catalog.Upstream // what the catalog knows of it
	Client *upstream.Client
	// Creds are its per-request credentials; nil for static headers
	// alone (which the client sends).
	Creds credentials.Source
	// Gate and Breaker guard every request to it; nil when not
	// configured.
	Gate    *budget.Gate
	Breaker *budget.Breaker
}

// Watched reports whether the gateway watches up's lists itself: an
// upstream reached as each caller has no stream of the gateway's own (its
// lists go by the TTL).
func (up *Upstream) Watched() bool {
	return up.Cfg.Watches() && (up.Creds == nil || !up.Creds.NeedsCaller(&credentials.Caller{}))
}

// A State is one configuration and what was built from it. It is not
// changed once built.
type State struct {
	Cfg       *config.Config
	Upstreams []*Upstream // config order
	ByName    map[string]*Upstream
	origins   map[string]bool // accepted Origin values
	tenants   *tenant.Set
	// PerRequest is set when some upstream has per-request credentials,
	// or is a stdio upstream (whose processes are per tenant): requests
	// then carry their caller in their context.
	PerRequest bool
	// Signer mints signed-identity tokens; nil when no upstream uses
	// them. KeysSum is of the key files it was made from.
	Signer  *identity.Signer
	KeysSum string
	// Plans are each tenant's rate limits and quotas.
	Plans *budget.Plans
	// Policy holds the tenants' policy rules; PDPCreds the gateway's
	// token for their decision point, or nil.
	Policy   *policy.Engine
	PDPCreds credentials.Source
	// Guards are the content guards, with what they found of
	// definitions under this generation.
	Guards *guard.Engine
}

// Config returns the State's config.
func (st *State) Config() *config.Config { return st.Cfg }

// Tenants returns the State's tenants.
func (st *State) Tenants() *tenant.Set { return st.tenants }

// AllowsOrigin reports whether an Origin header value is one the State
// accepts (compared case-insensitively).
func (st *State) AllowsOrigin(o string) bool { return st.origins[strings.ToLower(o)] }

// Names returns the upstreams' names, in config order.
func (st *State) Names() []string {
	names := make([]string, len(st.Upstreams))
	for i, up := range st.Upstreams {
		names[i] = up.Cfg.Name
	}
	return names
}

// CircuitNotes returns one line per upstream whose circuit is not
// closed, for /readyz.
func (st *State) CircuitNotes() []string {
	var notes []string
	for _, up := range st.Upstreams {
		if up.Breaker != nil {
			if s := up.Breaker.State(); s != "closed" {
				notes = append(notes, "upstream "+up.Cfg.Name+": circuit "+s)
			}
		}
	}
	return notes
}

// A Prepared config is one made ready to build: what of it can fail is
// built, and nothing shared is changed. One that is not built needs no
// cleaning up but Discard.
type Prepared struct {
	cfg     *config.Config
	signer  *identity.Signer
	keysSum string
	broker  *credentials.BrokerConfig
	policy  *policy.Engine
	guards  *guard.Engine
	// pdpCreds are the gateway's token for the policy decision point;
	// nil without policy.pdp.auth. The State built from it owns them.
	pdpCreds credentials.Source
}

// Config returns the prepared config.
func (p *Prepared) Config() *config.Config { return p.cfg }

// Discard releases what a Prepared config that will not be built holds.
func (p *Prepared) Discard() {
	if p.pdpCreds != nil {
		p.pdpCreds.Close()
	}
}

// Prepare makes cfg, which must be valid with defaults applied, ready to
// build, or fails with what makes it unusable; either way nothing shared
// changes. prev, if not nil, is the State in force: a signer whose key
// files did not change is kept. The signing keys it loads are the ones
// the generation signs with (a key file rotated between Prepare and Build
// is seen at the next reload).
func Prepare(cfg *config.Config, prev *State, sh *Shared) (*Prepared, error) {
	p := &Prepared{cfg: cfg}
	var err error
	if p.signer, p.keysSum, err = signerFor(cfg, prev, sh.Log); err != nil {
		return nil, err
	}
	if sh.Broker != nil {
		if p.broker, err = sh.Broker.Prepare(cfg); err != nil {
			return nil, fmt.Errorf("user_oauth: %w", err)
		}
	}
	if p.policy, p.pdpCreds, err = compilePolicy(cfg, sh); err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	if p.guards, err = compileGuards(cfg, sh.Metrics); err != nil {
		p.Discard()
		return nil, fmt.Errorf("guards: %w", err)
	}
	return p, nil
}

// Check reports what Prepare would refuse cfg for, with nothing built to
// serve: for gateway validate.
func Check(cfg *config.Config) error {
	log := slog.New(slog.DiscardHandler)
	if _, _, err := signerFor(cfg, nil, log); err != nil {
		return err
	}
	if _, err := credentials.VaultCipher(cfg); err != nil {
		return fmt.Errorf("user_oauth: %w", err)
	}
	_, src, err := compilePolicy(cfg, &Shared{Log: log})
	if err != nil {
		return fmt.Errorf("policy: %w", err)
	}
	if src != nil {
		src.Close()
	}
	if _, err := compileGuards(cfg, nil); err != nil {
		return fmt.Errorf("guards: %w", err)
	}
	return nil
}

// Build makes the State of p; it cannot fail. An upstream whose config is
// unchanged from prev keeps its Upstream (and so its client, its
// connections and its cached lists). Build applies p's settings to what
// is shared (the gates and breakers, the broker, the process limit): the
// caller swaps the State in right after.
func Build(p *Prepared, prev *State, sh *Shared) *State {
	cfg := p.cfg
	st := &State{
		Cfg: cfg, ByName: make(map[string]*Upstream), origins: make(map[string]bool), tenants: tenant.NewSet(cfg),
		Plans: budget.Compile(cfg), Signer: p.signer, KeysSum: p.keysSum,
		Policy: p.policy, PDPCreds: p.pdpCreds, Guards: p.guards,
	}
	// An upstream whose guards' settings are unchanged keeps them, and
	// one whose whole config is unchanged keeps its Upstream too.
	sh.Guards.Configure(cfg.Upstreams)
	if sh.Broker != nil {
		sh.Broker.Apply(p.broker)
	}
	sh.Processes.SetMax(cfg.Limits.StdioProcesses)
	sh.Processes.SetShares(cfg.Limits.StdioShares())
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway", "version": sh.Version})
	for _, u := range cfg.Upstreams {
		tc := cfg.TenantCredentials(u.Name)
		if prev != nil {
			// DeepEqual also compares u.TLS's fingerprint, the hash of
			// its files' contents: rotated files make a new client.
			if old := prev.ByName[u.Name]; old != nil && reflect.DeepEqual(old.Cfg, u) &&
				reflect.DeepEqual(prev.Cfg.TenantCredentials(u.Name), tc) && (!identity.Uses(cfg, &u) || prev.Signer == st.Signer) {
				st.Upstreams = append(st.Upstreams, old)
				st.ByName[u.Name] = old
				st.PerRequest = st.PerRequest || old.Creds != nil || u.IsStdio()
				continue
			}
		}
		up := newUpstream(cfg, u, tc, st.Signer, info, sh)
		// A stdio upstream's processes are per tenant: requests carry
		// the caller.
		st.PerRequest = st.PerRequest || up.Creds != nil || u.IsStdio()
		st.Upstreams = append(st.Upstreams, up)
		st.ByName[u.Name] = up
	}
	for _, o := range cfg.Server.AllowedOrigins {
		st.origins[strings.ToLower(o)] = true
	}
	if u, err := url.Parse(cfg.Server.PublicURL); err == nil && u.Host != "" {
		st.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return st
}

// newUpstream makes upstream u's client and credentials.
func newUpstream(cfg *config.Config, u config.Upstream, tc map[string]config.TenantUpstream, signer *identity.Signer, info json.RawMessage, sh *Shared) *Upstream {
	up := &Upstream{Cfg: u, Cat: catalog.NewUpstream(&u), Gate: sh.Guards.Gate(u.Name), Breaker: sh.Guards.Breaker(u.Name)}
	copts := credentials.Options{HTTPClient: sh.AuthClient, OnFetch: sh.Metrics.TokenFetch, Logger: sh.Log, Broker: sh.Broker}
	if signer != nil {
		copts.Signer = signer // a nil *Signer is not a nil interface
	}
	up.Creds = credentials.ForUpstream(cfg, &u, copts)
	var creds upstream.Credentials
	if up.Creds != nil {
		creds = up.Creds
	}
	var tenv map[string]map[string]string
	for id, tu := range tc {
		if len(tu.Env) > 0 {
			if tenv == nil {
				tenv = make(map[string]map[string]string)
			}
			tenv[id] = tu.Env
		}
	}
	up.Client = upstream.New(u, upstream.Options{
		// A stdio upstream runs a process per tenant (see
		// upstreams[].stdio.isolation), with the tenant's env.
		Tenant:       callerTenant,
		TenantEnv:    tenv,
		ProcessLimit: sh.Processes,
		OnProcess:    sh.Metrics.UpstreamProcess(u.Name),
		OnProcessLimit: func(limit, tenant string) {
			sh.Metrics.LimitRejection(processLimits[limit], tenant)
		},
		Credentials: creds,
		Secrets:     credentials.SecretsOf(&u, tc),
		HTTPClient:  sh.HTTPClient,
		Logger:      sh.Log, // the client adds its upstream's name
		ClientInfo:  info,
		// What a piped upstream is announced; every other upstream
		// session is announced its client's (see internal/announce).
		Capabilities: announce.Piped,
		Inject:       telemetry.InjectHeaders,
	})
	return up
}

// Release ends, once next is in force, what only prev held: the clients
// of upstreams next replaced or removed and prev's decision point token.
// Each end runs through run (the caller's owned goroutines; see
// internal/own), or at once when run refuses it (the owner is closing).
// In-flight requests still hold an old client; its Close only waits for
// its background work (bounded by the upstream's timeout) and drops idle
// connections.
func Release(prev, next *State, run func(func()) bool, log *slog.Logger) {
	later := func(f func()) {
		if !run(f) {
			f()
		}
	}
	if old := prev.PDPCreds; old != nil && old != next.PDPCreds {
		later(old.Close)
	}
	for name, old := range prev.ByName {
		if next.ByName[name] != old {
			later(func() {
				if err := old.Client.Close(); err != nil {
					log.Warn("closing the client of a replaced upstream", "upstream", name, "error", err)
				}
			})
		}
	}
}

// Close releases everything st holds, when the gateway stops: its
// upstreams' clients and its decision point token.
func (st *State) Close() error {
	if st.PDPCreds != nil {
		st.PDPCreds.Close()
	}
	var errs []error
	for _, up := range st.Upstreams {
		errs = append(errs, up.Client.Close())
	}
	return errors.Join(errs...)
}

// Replaced returns the names of prev's upstreams that next replaced or
// removed.
func Replaced(prev, next *State) []string {
	var names []string
	for name, old := range prev.ByName {
		if next.ByName[name] != old {
			names = append(names, name)
		}
	}
	return names
}

// TenantChanged reports whether what tenant id sees may differ between two
// States: its rules changed, or an upstream it sees in either was added,
// removed or reconfigured.
func TenantChanged(prev, next *State, id string) bool {
	pv, err1 := prev.tenants.Get(id)
	nv, err2 := next.tenants.Get(id)
	if err1 != nil || err2 != nil {
		return true
	}
	if !reflect.DeepEqual(tenantConfig(prev.Cfg, id), tenantConfig(next.Cfg, id)) {
		return true
	}
	if !slices.Equal(pv.Upstreams, nv.Upstreams) {
		return true
	}
	for _, name := range nv.Upstreams {
		if prev.ByName[name] != next.ByName[name] {
			return true
		}
	}
	return false
}

func tenantConfig(cfg *config.Config, id string) *config.Tenant {
	for i := range cfg.Tenants {
		if cfg.Tenants[i].ID == id {
			return &cfg.Tenants[i]
		}
	}
	return nil
}

// processLimits are the limit labels of the bounds of stdio processes.
var processLimits = map[string]string{
	pipe.LimitTotal: telemetry.LimitStdioProcesses, pipe.LimitTotalPrincipal: telemetry.LimitStdioProcessesPrincipal,
	pipe.LimitTotalTenant: telemetry.LimitStdioProcessesTenant, pipe.LimitMaxConns: telemetry.LimitMaxProcesses,
	pipe.LimitPrincipalConns: telemetry.LimitMaxProcessesPrincipal, pipe.LimitTenantConns: telemetry.LimitMaxProcessesTenant,
}
