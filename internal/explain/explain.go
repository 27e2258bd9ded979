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
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mcpgw/gateway/internal/budget"
	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/guard"
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
	// apply too: each item is then marked as that principal would see it,
	// with the rule that decided.
	Principal *policy.Principal
	// Call, if set, is a tools/call whose call-time decision is reported
	// for Principal: the tool as the tenant sees it, and its arguments (a
	// JSON object, or nil).
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
// The operator console shows the same [Report] as a page.
func Explain(ctx context.Context, cfg *config.Config, id string, w io.Writer, opts Options) error {
	r, err := Tenant(ctx, cfg, id, opts)
	if err != nil {
		return err
	}
	r.WriteText(w)
	return nil
}

// A Report is what one tenant would see of each upstream, and why.
type Report struct {
	Tenant string
	// Budgets are the tenant's rate limits and quotas, one line each.
	Budgets []string
	// Search describes the tenant's tool search; "" when it has none.
	Search    string
	Upstreams []UpstreamReport
	// Subject is the principal whose policy rules were applied; "" when
	// none were.
	Subject string
	// Call is the call-time decision of Options.Call, in one line; ""
	// when none was asked for.
	Call string
}

// An UpstreamReport is what the tenant would see of one upstream.
type UpstreamReport struct {
	Name, Prefix string
	// Hidden: the tenant is not given the upstream at all.
	Hidden bool
	// Concurrency and Breaker describe its guards; "" when it has none.
	Concurrency, Breaker string
	// Budgets name the budgets of its prompts, resources and completions.
	Budgets []string
	// Identity is how the gateway reaches it for the tenant: the mode,
	// then whose credentials ("the same for every tenant", "per user"...).
	Identity string
	// PerUser: it is reached as each user, so nothing is listed here.
	PerUser bool
	// Unreachable is why it could not be asked for its lists; "" when it
	// answered.
	Unreachable string
	Kinds       []KindReport
	// call is the decision of Options.Call, when the tool is this
	// upstream's.
	call string
}

// A KindReport is one of an upstream's lists (tools, prompts, resources,
// resourceTemplates) as the tenant would see it.
type KindReport struct {
	// Field names the list: "tools", "prompts", "resources",
	// "resourceTemplates".
	Field string
	// Failed is why the list could not be read; "" when it was.
	Failed string
	Items  []Item
}

// An Item is one tool, prompt, resource or template, and why the tenant
// sees it or not. It names fixed arguments, never their values.
type Item struct {
	// Shown is the name the tenant sees it by (its alias for a tool that
	// has one); Original the upstream's name or URI; Exposed the name
	// with the upstream's prefix, which an alias hides.
	Shown, Original, Exposed string
	// Visible: listed and usable (allowed, and not quarantined).
	Visible bool
	// Rule is the tenant rule that decided.
	Rule string
	// Policy is the principal's policy rule that decided ("" without a
	// principal, or without rules); PolicyHidden says it hides the item.
	Policy       string
	PolicyHidden bool
	// Guard says what the definitions guards found in it ("" nothing);
	// Quarantined that they block it: hidden and uncallable.
	Guard       string
	Quarantined bool
	// Pin describes a definition that does not match its pin; "" when
	// it matches or is not pinned.
	Pin string
	// Scopes are the scopes a token also needs to call the tool.
	Scopes []string
	// Annotations: the admin asserts the tool's annotations.
	Annotations bool
	// Budgets name the budgets that count its calls.
	Budgets []string
	// Alias: Shown is an alias of Exposed.
	Alias bool
	// DescriptionReplaced: the tenant sees the admin's description.
	DescriptionReplaced bool
	// FixedArguments are the names of the arguments the admin fixes.
	FixedArguments []string
}

// Note is why the item is shown or hidden, in one line: the rule, then
// what else applies to it.
func (it *Item) Note() string {
	note := it.Rule
	switch {
	case it.PolicyHidden:
		note += "; hidden by policy: " + it.Policy
	case it.Policy != "":
		note += "; policy: " + it.Policy
	}
	if it.Pin != "" {
		note += "; pin: " + it.Pin
	}
	switch {
	case it.Quarantined:
		note += "; quarantined by guards (found: " + it.Guard + ")"
	case it.Guard != "":
		note += "; guards found: " + it.Guard
	}
	if len(it.Scopes) > 0 {
		note += fmt.Sprintf("; requires scopes %v", it.Scopes)
	}
	if it.Annotations {
		note += "; admin-asserted annotations"
	}
	if len(it.Budgets) > 0 {
		note += "; budgets: " + strings.Join(it.Budgets, ", ")
	}
	if it.Alias {
		note += "; alias of " + it.Exposed + " (not shown)"
	}
	if it.DescriptionReplaced {
		note += "; description replaced"
	}
	if len(it.FixedArguments) > 0 {
		note += "; fixed arguments: " + strings.Join(it.FixedArguments, ", ")
	}
	return note
}

// WriteText writes r as gateway explain prints it.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "tenant %q\n", r.Tenant)
	if r.Subject != "" {
		fmt.Fprintf(w, "as subject %q: policy rules applied\n", r.Subject)
	}
	for _, b := range r.Budgets {
		fmt.Fprintf(w, "budget: %s\n", b)
	}
	if r.Search != "" {
		fmt.Fprintf(w, "tool search: %s\n", r.Search)
	}
	for _, u := range r.Upstreams {
		if u.Hidden {
			fmt.Fprintf(w, "\nupstream %s: hidden (not listed for this tenant; never initialized for its sessions)\n", u.Name)
			continue
		}
		fmt.Fprintf(w, "\nupstream %s (prefix %q)\n", u.Name, u.Prefix)
		if u.Concurrency != "" {
			fmt.Fprintf(w, "  concurrency: %s\n", u.Concurrency)
		}
		if u.Breaker != "" {
			fmt.Fprintf(w, "  circuit breaker: %s\n", u.Breaker)
		}
		if len(u.Budgets) > 0 {
			fmt.Fprintf(w, "  budgets of its prompts, resources and completions: %s\n", strings.Join(u.Budgets, ", "))
		}
		fmt.Fprintf(w, "  identity: %s\n", u.Identity)
		if u.PerUser {
			fmt.Fprintf(w, "  not listed: the upstream is reached as each user\n")
			continue
		}
		if u.Unreachable != "" {
			fmt.Fprintf(w, "  unreachable: %s\n", u.Unreachable)
			continue
		}
		for _, k := range u.Kinds {
			fmt.Fprintf(w, "  %s\n", k.Field)
			if k.Failed != "" {
				fmt.Fprintf(w, "    failed: %s\n", k.Failed)
				continue
			}
			tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
			for _, it := range k.Items {
				mark := "-"
				if it.Visible {
					mark = "+"
				}
				fmt.Fprintf(tw, "    %s %s\t%s\t%s\n", mark, it.Shown, it.Original, it.Note())
			}
			tw.Flush()
		}
	}
	if r.Call != "" {
		fmt.Fprintf(w, "\n%s\n", r.Call)
	}
}

// Tenant returns what tenant id would see of every upstream of cfg, and
// why (see [Explain]), asking the upstreams for their lists.
func Tenant(ctx context.Context, cfg *config.Config, id string, opts Options) (*Report, error) {
	view, err := tenant.NewSet(cfg).Get(id)
	if err != nil {
		return nil, fmt.Errorf("tenant %q: %w", id, err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Tenant: id}
	plan := budget.Compile(cfg).Tenant(id)
	if plan != nil {
		for _, r := range plan.Edge {
			rep.Budgets = append(rep.Budgets, fmt.Sprintf("rate limit %s on every request: %s", r.Name, r.Detail))
		}
		for _, r := range plan.Calls {
			rep.Budgets = append(rep.Budgets, fmt.Sprintf("rate limit %s: %s", r.Name, r.Detail))
		}
		for _, q := range plan.Quotas {
			rep.Budgets = append(rep.Budgets, fmt.Sprintf("quota %s: %s", q.Name, q.Detail))
		}
	}
	if ts := view.Search; ts != nil {
		rep.Search = fmt.Sprintf("mode %s, at most %d results: tools/list ", ts.Mode, ts.MaxResults)
		if ts.Mode == config.SearchBeside {
			rep.Search += fmt.Sprintf("adds %s and %s to the tools below", toolsearch.SearchTool, toolsearch.CallTool)
		} else {
			rep.Search += fmt.Sprintf("holds only %s and %s; they find and call the tools below", toolsearch.SearchTool, toolsearch.CallTool)
		}
	}
	var rules *policy.Engine
	if opts.Principal != nil {
		opts.Principal.Tenant = id
		if rules, err = policy.Compile(cfg, policy.Options{HTTPClient: opts.HTTPClient}); err != nil {
			return nil, fmt.Errorf("policy: %w", err)
		}
		rep.Subject = opts.Principal.Subject
		if rep.Subject == "" {
			rep.Subject = "(none)"
		}
	}
	guards, err := guard.Compile(cfg, guard.Options{HTTPClient: opts.HTTPClient})
	if err != nil {
		return nil, fmt.Errorf("guards: %w", err)
	}
	info, _ := json.Marshal(map[string]string{"name": "mcp-gateway-explain", "version": "0"})
	for _, u := range cfg.Upstreams {
		ur := UpstreamReport{Name: u.Name, Prefix: u.EffectivePrefix()}
		if !view.Allows(u.Name) {
			ur.Hidden = true
			rep.Upstreams = append(rep.Upstreams, ur)
			continue
		}
		if c := u.Concurrency; c != nil {
			ur.Concurrency = fmt.Sprintf("%d in flight per replica", c.MaxInFlight)
			if c.PerTenant > 0 {
				ur.Concurrency += fmt.Sprintf(", %d per tenant", c.PerTenant)
			}
			ur.Concurrency += fmt.Sprintf(", %d queued (%d per tenant, %d per principal) for at most %s", c.QueueSize(), c.TenantQueue(), c.PrincipalQueue(), c.QueueTimeout)
		}
		if b := u.CircuitBreaker; b != nil {
			ur.Breaker = fmt.Sprintf("opens after %d consecutive failures for %s, %d probes at once", b.Failures, b.OpenFor, b.HalfOpenProbes)
		}
		ur.Budgets = plan.For(u.Name, "")
		explainUpstream(ctx, cfg, u, id, view, plan, rules, guards, info, log, opts, &ur)
		if ur.call != "" {
			rep.Call = ur.call
		}
		rep.Upstreams = append(rep.Upstreams, ur)
	}
	if opts.Call != nil && rep.Call == "" {
		rep.Call = "call " + opts.Call.Tool + ": no policy rule applies to it for this principal, or the tenant does not see it"
	}
	return rep, nil
}

// callLine is the call-time decision d of call c, in one line.
func callLine(c *Call, d policy.Decision) string {
	verdict := "allowed"
	if !d.Allow {
		verdict = "refused"
	}
	s := "call " + c.Tool + ": " + verdict + " by " + d.Rule()
	if !d.Allow && d.Message != "" {
		s += ": " + d.Message
	}
	if d.Err != nil {
		s += " (error: " + d.Err.Error() + ")"
	}
	return s
}

// explainUpstream fills ur with what the tenant sees of u's lists.
func explainUpstream(ctx context.Context, cfg *config.Config, u config.Upstream, id string, view *tenant.View, plan *budget.Plan, rules *policy.Engine, guards *guard.Engine, info json.RawMessage, log *slog.Logger, opts Options, ur *UpstreamReport) {
	uopts := upstream.Options{HTTPClient: opts.HTTPClient, Logger: log, ClientInfo: info}
	if src := credentials.ForUpstream(cfg, &u, credentials.Options{HTTPClient: opts.HTTPClient, Logger: log}); src != nil {
		who := &credentials.Caller{Tenant: id}
		mode, part := src.Mode(who), "the same for every tenant"
		switch p := src.Partition(who); {
		case src.NeedsCaller(who):
			part = "per user"
		case p != "":
			part = "this tenant's own"
		}
		ur.Identity = fmt.Sprintf("%s, %s", mode, part)
		if src.NeedsCaller(who) {
			// No user here to act for: what each user sees is what the
			// upstream shows that user.
			ur.PerUser = true
			src.Close()
			return
		}
		uopts.Credentials = src
		ctx = credentials.With(ctx, who)
	} else {
		ur.Identity = "static headers, the same for every tenant"
	}
	if u.IsStdio() {
		// The tenant's own process, with its env.
		uopts.Tenant = func(context.Context) string { return id }
		if tu, ok := cfg.TenantCredentials(u.Name)[id]; ok && len(tu.Env) > 0 {
			uopts.TenantEnv = map[string]map[string]string{id: tu.Env}
		}
	}
	c := upstream.New(u, uopts)
	defer c.Close()
	res, err := c.OpenAs(ctx, noCaps)
	if err != nil {
		// An admin's tool: it says where it tried, which the errors
		// clients see leave out.
		ur.Unreachable = where(&u) + ": " + err.Error()
		return
	}
	defer func() { _ = c.Terminate(ctx, res.Session) }()
	caps, _ := jsonx.ParseObject(res.Session.Capabilities)
	for _, k := range []catalog.Kind{catalog.Tools, catalog.Prompts, catalog.Resources, catalog.Templates} {
		kinfo := k.Info()
		if caps == nil || caps.Get(kinfo.Capability) == nil {
			continue
		}
		kr := KindReport{Field: kinfo.Field}
		items, raws, err := listAll(ctx, c, res.Session, k, catalog.Bounds{Pages: cfg.Limits.ListPages, Bytes: cfg.Limits.ListBytes})
		if err != nil {
			kr.Failed = err.Error()
			ur.Kinds = append(ur.Kinds, kr)
			continue
		}
		for i, orig := range items {
			d := view.Decide(k.Policy(), u.Name, orig)
			var pin *catalog.PinStatus
			if u.Pin != nil && k.Pinnable() {
				_, pin = catalog.CheckPin(u.Pin, u.Name, k, orig, raws[i])
			}
			it := Item{Original: orig, Exposed: k.Expose(ur.Prefix, orig), Rule: d.Rule}
			it.Shown = it.Exposed
			it.Visible = d.Allowed && (pin == nil || !pin.Quarantined)
			if pin != nil {
				it.Pin = pin.Describe()
			}
			if k == catalog.Tools && d.Allowed {
				it.Scopes = view.RequiredScopes(u.Name, orig)
				_, it.Annotations = view.Annotations(u.Name, orig)
				it.Budgets = plan.For(u.Name, orig)
				if p, ok := view.Presentation(u.Name, orig); ok {
					if p.Alias != "" {
						it.Alias, it.Shown = true, p.Alias
					}
					it.DescriptionReplaced = p.Description != nil
					if len(p.FixedArguments) > 0 {
						it.FixedArguments = slices.Sorted(maps.Keys(p.FixedArguments))
					}
				}
			}
			if tool := map[bool]string{true: orig}[k == catalog.Tools]; d.Allowed {
				if s := guards.For(id, u.Name, tool); s != nil && s.Has(guard.Definitions) {
					in := &guard.Input{Tenant: id, Upstream: u.Name, Tool: tool, Method: kinfo.ListMethod}
					if tool == "" {
						in.Item = orig
					}
					_, v := s.Definition(ctx, in, raws[i])
					var ks []string
					for _, f := range v.Findings {
						if !slices.Contains(ks, f.Kind) {
							ks = append(ks, f.Kind)
						}
					}
					it.Guard = strings.Join(ks, ",")
					if v.Action == guard.Block {
						it.Quarantined, it.Visible = true, false
					}
				}
			}
			if rules != nil && d.Allowed && rules.HasRules(id, u.Name) {
				in := policy.Input{Principal: opts.Principal, Phase: policy.PhaseList, Method: kinfo.ListMethod,
					Kind: k.Policy(), Upstream: u.Name, Name: it.Shown, Original: orig}
				pd := rules.Decide(ctx, &in)
				it.Policy, it.PolicyHidden = pd.Rule(), !pd.Allow
				if !pd.Allow {
					it.Visible = false
				} else if c := opts.Call; c != nil && k == catalog.Tools && c.Tool == it.Shown {
					in.Phase, in.Method, in.Arguments = policy.PhaseCall, protocol.MethodToolsCall, c.Arguments
					ur.call = callLine(c, rules.Decide(ctx, &in))
				}
			}
			kr.Items = append(kr.Items, it)
		}
		ur.Kinds = append(ur.Kinds, kr)
	}
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

// filepathOrURL is s, a file path or URL, without a URL's userinfo, query
// or fragment.
func filepathOrURL(s string) string {
	if p, err := url.Parse(s); err == nil && p.Host != "" {
		p.User, p.RawQuery, p.Fragment = nil, "", ""
		return p.String()
	}
	return s
}

// where is the address of upstream u, for an admin: its URL (an openapi
// upstream's base URL or document) without userinfo, query or fragment, or
// a stdio upstream's program.
func where(u *config.Upstream) string {
	if u.IsStdio() {
		if len(u.Command) > 0 {
			return "command " + strconv.Quote(u.Command[0])
		}
		return "command"
	}
	addr := u.URL
	if u.IsOpenAPI() && u.OpenAPI != nil {
		if addr = u.OpenAPI.BaseURL; addr == "" {
			return "openapi document " + strconv.Quote(filepathOrURL(u.OpenAPI.Document))
		}
	}
	p, err := url.Parse(addr)
	if err != nil {
		return "url"
	}
	p.User, p.RawQuery, p.Fragment = nil, "", ""
	return p.String()
}
