// Package explain tells an admin, before a config is loaded, what a tenant
// would see of each upstream and why (gateway explain), and pins the
// upstreams' definitions (gateway pin). It reaches the upstreams as the
// gateway would, with their credentials, outside any client's session.
package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/session"
	"github.com/mcpgw/gateway/internal/tenant"
	"github.com/mcpgw/gateway/internal/toolsearch"
	"github.com/mcpgw/gateway/internal/upstream"
)

// Options configure Explain and Pin.
type Options struct {
	// HTTPClient talks to the upstreams; nil means each gets its own.
	HTTPClient *http.Client
	// Logger, if nil, means no logging.
	Logger *slog.Logger
	// Principal, if set, is the caller whose policy rules (docs/policy.md)
	// Explain applies too: each item is then marked as that principal
	// would see it, with the rule that decided.
	Principal *policy.Principal
	// Call, if set, is a tools/call whose call-time decision Explain
	// reports for Principal: the tool as the tenant sees it, and its
	// arguments (a JSON object, or nil).
	Call *Call
}

// A Call is a tools/call to explain.
type Call struct {
	Tool      string
	Arguments json.RawMessage
}

// Explain writes to w, for every upstream of cfg, what tenant id would see
// and why: each tool, prompt, resource and resource template under the name
// the tenant would see it, marked + (visible and usable) or - (hidden), with
// the rule that decided. It asks the upstreams for their lists, as the
// gateway would, so admins can check a config before they load it. An
// upstream that cannot be reached is reported and the others still are.
func Explain(ctx context.Context, cfg *config.Config, id string, w io.Writer, opts Options) error {
	view, err := tenant.NewSet(cfg).Get(id)
	if err != nil {
		return fmt.Errorf("tenant %q: %w", id, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fmt.Fprintf(w, "tenant %q\n", id)
	plan := budget.Compile(cfg).Tenant(id)
	if plan != nil {
		for _, r := range plan.Edge {
			fmt.Fprintf(w, "budget: rate limit %s on every request: %s\n", r.Name, r.Detail)
		}
		for _, r := range plan.Calls {
			fmt.Fprintf(w, "budget: rate limit %s: %s\n", r.Name, r.Detail)
		}
		for _, q := range plan.Quotas {
			fmt.Fprintf(w, "budget: quota %s: %s\n", q.Name, q.Detail)
		}
	}
	if ts := view.Search; ts != nil {
		fmt.Fprintf(w, "tool search: mode %s, at most %d results: tools/list ", ts.Mode, ts.MaxResults)
		if ts.Mode == config.SearchBeside {
			fmt.Fprintf(w, "adds %s and %s to the tools below\n", toolsearch.SearchTool, toolsearch.CallTool)
		} else {
			fmt.Fprintf(w, "holds only %s and %s; they find and call the tools below\n", toolsearch.SearchTool, toolsearch.CallTool)
		}
	}
	var rules *policy.Engine
	if opts.Principal != nil {
		opts.Principal.Tenant = id
		if rules, err = policy.Compile(cfg, policy.Options{HTTPClient: opts.HTTPClient}); err != nil {
			return fmt.Errorf("policy: %w", err)
		}
		fmt.Fprintf(w, "as subject %q: policy rules applied\n", opts.Principal.Subject)
	}
	callSeen := false
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway-explain", "version": "0"})
	for _, u := range cfg.Upstreams {
		prefix := u.EffectivePrefix()
		if !view.Allows(u.Name) {
			fmt.Fprintf(w, "\nupstream %s: hidden (not listed for this tenant; never initialized for its sessions)\n", u.Name)
			continue
		}
		fmt.Fprintf(w, "\nupstream %s (prefix %q)\n", u.Name, prefix)
		if c := u.Concurrency; c != nil {
			fmt.Fprintf(w, "  concurrency: %d in flight per replica", c.MaxInFlight)
			if c.PerTenant > 0 {
				fmt.Fprintf(w, ", %d per tenant", c.PerTenant)
			}
			fmt.Fprintf(w, ", %d queued (%d per tenant, %d per principal) for at most %s\n", c.QueueSize(), c.TenantQueue(), c.PrincipalQueue(), c.QueueTimeout)
		}
		if b := u.CircuitBreaker; b != nil {
			fmt.Fprintf(w, "  circuit breaker: opens after %d consecutive failures for %s, %d probes at once\n", b.Failures, b.OpenFor, b.HalfOpenProbes)
		}
		if names := plan.For(u.Name, ""); len(names) > 0 {
			fmt.Fprintf(w, "  budgets of its prompts, resources and completions: %s\n", strings.Join(names, ", "))
		}
		uopts := upstream.Options{HTTPClient: opts.HTTPClient, Logger: log, ClientInfo: info}
		ctx := ctx
		if src := credentials.ForUpstream(cfg, &u, credentials.Options{HTTPClient: opts.HTTPClient, Logger: log}); src != nil {
			who := &credentials.Caller{Tenant: id}
			mode, part := src.Mode(who), "the same for every tenant"
			switch p := src.Partition(who); {
			case src.NeedsCaller(who):
				part = "per user"
			case p != "":
				part = "this tenant's own"
			}
			fmt.Fprintf(w, "  identity: %s, %s\n", mode, part)
			if src.NeedsCaller(who) {
				// No user here to act for: what each user sees is
				// what the upstream shows that user.
				fmt.Fprintf(w, "  not listed: the upstream is reached as each user\n")
				src.Close()
				continue
			}
			uopts.Credentials = src
			ctx = credentials.With(ctx, who)
		} else {
			fmt.Fprintf(w, "  identity: static headers, the same for every tenant\n")
		}
		if u.IsStdio() {
			// The tenant's own process, with its env.
			uopts.Tenant = func(context.Context) string { return id }
			if tu, ok := cfg.TenantCredentials(u.Name)[id]; ok && len(tu.Env) > 0 {
				uopts.TenantEnv = map[string]map[string]string{id: tu.Env}
			}
		}
		c := upstream.New(u, uopts)
		res, err := c.OpenAs(ctx, noCaps)
		if err != nil {
			fmt.Fprintf(w, "  unreachable: %v\n", err)
			c.Close()
			continue
		}
		caps, _ := jsonx.ParseObject(res.Session.Capabilities)
		for _, k := range []catalog.Kind{catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates} {
			info := k.Info()
			if caps == nil || caps.Get(info.Capability) == nil {
				continue
			}
			items, raws, err := listAll(ctx, c, res.Session, k, catalog.Bounds{Pages: cfg.Limits.ListPages, Bytes: cfg.Limits.ListBytes})
			fmt.Fprintf(w, "  %s\n", info.Field)
			if err != nil {
				fmt.Fprintf(w, "    failed: %v\n", err)
				continue
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for i, orig := range items {
				d := view.Decide(k.Policy(), u.Name, orig)
				var pin *catalog.PinStatus
				if u.Pin != nil && k.Pinnable() {
					_, pin = catalog.CheckPin(u.Pin, u.Name, k, orig, raws[i])
				}
				mark := "-"
				if d.Allowed && (pin == nil || !pin.Quarantined) {
					mark = "+"
				}
				note := d.Rule
				if pin != nil {
					note += "; pin: " + pin.Describe()
				}
				if k == catalog.Tools && d.Allowed {
					if s := view.RequiredScopes(u.Name, orig); len(s) > 0 {
						note += fmt.Sprintf("; requires scopes %v", s)
					}
					if _, ok := view.Annotations(u.Name, orig); ok {
						note += "; admin-asserted annotations"
					}
					if names := plan.For(u.Name, orig); len(names) > 0 {
						note += "; budgets: " + strings.Join(names, ", ")
					}
				}
				shown := k.Expose(prefix, orig)
				if k == catalog.Tools && d.Allowed {
					if p, ok := view.Presentation(u.Name, orig); ok && p.Alias != "" {
						shown = p.Alias
					}
				}
				if rules != nil && d.Allowed && rules.HasRules(id, u.Name) {
					in := policy.Input{Principal: opts.Principal, Phase: policy.PhaseList, Method: info.ListMethod,
						Kind: k.Policy(), Upstream: u.Name, Name: shown, Original: orig}
					pd := rules.Decide(ctx, &in)
					if !pd.Allow {
						mark = "-"
						note += "; hidden by policy: " + pd.Rule()
					} else {
						note += "; policy: " + pd.Rule()
					}
					if c := opts.Call; c != nil && k == catalog.Tools && c.Tool == shown {
						callSeen = true
						in.Phase, in.Method, in.Arguments = policy.PhaseCall, protocol.MethodToolsCall, c.Arguments
						explainCall(w, c, rules.Decide(ctx, &in))
					}
				}
				shown = k.Expose(prefix, orig)
				if k == catalog.Tools && d.Allowed {
					if p, ok := view.Presentation(u.Name, orig); ok {
						if p.Alias != "" {
							note += "; alias of " + shown + " (not shown)"
							shown = p.Alias
						}
						if p.Description != nil {
							note += "; description replaced"
						}
						if len(p.FixedArguments) > 0 {
							note += "; fixed arguments: " + strings.Join(slices.Sorted(maps.Keys(p.FixedArguments)), ", ")
						}
					}
				}
				fmt.Fprintf(tw, "    %s %s\t%s\t%s\n", mark, shown, orig, note)
			}
			tw.Flush()
		}
		_ = c.Terminate(ctx, res.Session)
		c.Close()
	}
	if opts.Call != nil && !callSeen {
		fmt.Fprintf(w, "\ncall %s: no policy rule applies to it for this principal, or the tenant does not see it\n", opts.Call.Tool)
	}
	return nil
}

// explainCall writes the call-time decision d of call c.
func explainCall(w io.Writer, c *Call, d policy.Decision) {
	verdict := "allowed"
	if !d.Allow {
		verdict = "refused"
	}
	fmt.Fprintf(w, "    call %s: %s by %s", c.Tool, verdict, d.Rule())
	if !d.Allow && d.Message != "" {
		fmt.Fprintf(w, ": %s", d.Message)
	}
	if d.Err != nil {
		fmt.Fprintf(w, " (error: %v)", d.Err)
	}
	fmt.Fprintln(w)
}

// noCaps is the ClientCapabilities of a client that declares none.
var noCaps = json.RawMessage(`{}`)

// listAll returns the original keys (names or URIs) of every item of kind
// k an upstream lists, following pagination.
func listAll(ctx context.Context, c *upstream.Client, us session.Upstream, k catalog.Kind, b catalog.Bounds) ([]string, []json.RawMessage, error) {
	n := 0
	raw, _, err := catalog.Paginate(c.Name(), k, b, func(params json.RawMessage) (json.RawMessage, error) {
		n++
		resp, err := c.Call(ctx, us, jsonrpc.StringID("explain."+strconv.Itoa(n)), k.Info().ListMethod, params)
		if err != nil {
			return nil, err
		}
		defer resp.Close()
		return resp.Result()
	})
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var raws []json.RawMessage
	for _, e := range raw {
		if o, err := jsonx.ParseValidObject(e); err == nil {
			if key, ok := o.GetString(k.Info().Key); ok {
				out = append(out, key)
				raws = append(raws, e)
			}
		}
	}
	return out, raws, nil
}

// Pin lists the tools and prompts of every upstream of cfg, as the
// gateway would (with the upstream's own credentials, as no tenant), and
// returns their pins. An upstream reached as each user, or that cannot be
// reached, is an error: a pins file that leaves it out would quarantine
// or accept its items by accident.
func Pin(ctx context.Context, cfg *config.Config, opts Options) (*config.PinsFile, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway-pin", "version": "0"})
	f := &config.PinsFile{Version: config.PinsVersion, Upstreams: map[string]*config.UpstreamPins{}}
	for _, u := range cfg.Upstreams {
		uopts := upstream.Options{HTTPClient: opts.HTTPClient, Logger: log, ClientInfo: info}
		ctx := ctx
		if src := credentials.ForUpstream(cfg, &u, credentials.Options{HTTPClient: opts.HTTPClient, Logger: log}); src != nil {
			who := &credentials.Caller{}
			if src.NeedsCaller(who) {
				src.Close()
				return nil, fmt.Errorf("upstream %s: reached as each user: its definitions cannot be pinned", u.Name)
			}
			uopts.Credentials = src
			ctx = credentials.With(ctx, who)
		}
		c := upstream.New(u, uopts)
		pins, err := pinUpstream(ctx, cfg, c)
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("upstream %s: %w", u.Name, err)
		}
		f.Upstreams[u.Name] = pins
	}
	return f, nil
}

func pinUpstream(ctx context.Context, cfg *config.Config, c *upstream.Client) (*config.UpstreamPins, error) {
	res, err := c.OpenAs(ctx, noCaps)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Terminate(ctx, res.Session) }()
	caps, _ := jsonx.ParseObject(res.Session.Capabilities)
	pins := &config.UpstreamPins{}
	for _, k := range []catalog.Kind{catalog.Tools, catalog.Prompts} {
		if caps == nil || caps.Get(k.Info().Capability) == nil {
			continue
		}
		names, raws, err := listAll(ctx, c, res.Session, k, catalog.Bounds{Pages: cfg.Limits.ListPages, Bytes: cfg.Limits.ListBytes})
		if err != nil {
			return nil, err
		}
		m := make(map[string]config.PinnedItem, len(names))
		for i, name := range names {
			if p, ok := catalog.PinOf(k, raws[i]); ok {
				m[name] = p
			}
		}
		if k == catalog.Tools {
			pins.Tools = m
		} else {
			pins.Prompts = m
		}
	}
	return pins, nil
}
