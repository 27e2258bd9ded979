// Package guard inspects the content that flows through the gateway: the
// arguments of a tool call before the upstream sees them, the results
// (tool results, prompts/get messages, resources/read contents) before the
// client sees them, and the definitions of tools, prompts and resources
// when a list is fetched. Built-in detectors (credentials, personal data,
// hidden text, instructions aimed at the model), the admins' own patterns
// and external hooks find what should not pass; a guard's action redacts
// it in place, blocks the message, or flags it for the audit log and
// metrics. docs/guards.md describes guards for admins.
//
// An [Engine] is compiled once per config generation and is immutable and
// safe for concurrent use. [Engine.For] gives the [Set] of guards that
// apply to one tenant's use of one upstream's tool (nil when none does:
// a call without guards costs one map lookup).
//
// Nothing the guards find is ever kept: findings name the kind and count
// of what was found, never the text, and the same holds for errors,
// messages and the hooks' events.
package guard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/glob"
)

// Phase is what is inspected.
type Phase uint8

const (
	// Arguments are a tools/call's arguments (a JSON object), after fixed
	// arguments are set, before the upstream is called.
	Arguments Phase = iota
	// Results are a tools/call result (CallToolResult), a prompts/get
	// result or a resources/read result, before the client gets it.
	Results
	// Definitions are one tool, prompt or resource definition of a list,
	// when the list is fetched.
	Definitions
	numPhases
)

func (p Phase) String() string {
	switch p {
	case Arguments:
		return config.GuardPhaseArguments
	case Results:
		return config.GuardPhaseResults
	}
	return config.GuardPhaseDefinitions
}

// Action is what a guard did; the actions are ordered, Block strongest.
type Action uint8

const (
	// Pass: nothing found.
	Pass Action = iota
	// Flag: found, recorded (audit, metrics) and passed as it was.
	Flag
	// Redact: found and replaced in place by [redacted:KIND] (hidden text
	// is removed).
	Redact
	// Block: the arguments are refused, the result is withheld, the
	// definition is quarantined.
	Block
)

func (a Action) String() string {
	return [...]string{"pass", "flag", "redact", "block"}[a]
}

// Input says whose content it is, for the hooks and the findings.
type Input struct {
	Tenant, Subject string
	Upstream        string
	// Tool is the tool's original name; empty for prompts and resources.
	Tool string
	// Item names a prompt (its original name) or a resource (its URI).
	Item string
	// Method is the MCP method: "tools/call", "prompts/get",
	// "resources/read", "tools/list", ...
	Method string
}

// A Finding is what one guard found of one kind in one message, and what
// it did about it. It never holds the text found.
type Finding struct {
	// Guard is the guard's name, or its config path.
	Guard string
	// Kind is what was found: a detector's kind ("aws-access-key",
	// "email", "zero-width"), an extra pattern's kind, "gateway-secret",
	// "oversize" (content larger than max_bytes), "too-many-findings",
	// "invalid-json", or for a hook "webhook" (its answer) and
	// "webhook-error" (it could not be asked).
	Kind   string
	Phase  Phase
	Action Action
	// Count is how many times it was found.
	Count int
}

// A Verdict is the outcome of inspecting one message.
type Verdict struct {
	// Action is the strongest action taken: Pass when nothing was found.
	Action Action
	// Findings are what was found, by guard and kind, in the order first
	// found.
	Findings []Finding
	// Message, for Block, says why, for the model: which kinds were
	// found, never the text.
	Message string
	// Err is why a hook could not be asked (whatever its on_error then
	// decided); it holds no content.
	Err error
}

// Options are what a compiled Engine needs besides the config.
type Options struct {
	// HTTPClient, if set, is the client of every hook (tests); nil: each
	// hook gets a client of its own with its TLS settings and no
	// redirects.
	HTTPClient *http.Client
	// Secrets, if set, returns the gateway's own secrets for an upstream
	// (its configured header values, its client secret, the tokens the
	// gateway fetched for it): they are redacted from that upstream's
	// results whatever is configured. It is called once per upstream by
	// Compile, to learn which upstreams have any (those without are not
	// inspected for them), and again for each result, since fetched
	// tokens change. It must be fast and safe for concurrent use.
	Secrets func(upstream string) []string
	// OnFinding, if set, is called for each finding of each inspected
	// message (for metrics and the audit log).
	OnFinding func(*Input, Finding)
	// OnWebhook, if set, is called after each request to a hook (and for
	// each one not sent because of max_in_flight), for metrics.
	OnWebhook func(WebhookEvent)
}

// maxMatches bounds the findings of one message: past them, it is
// blocked (kind too-many-findings), never partly redacted and passed.
const maxMatches = 10000

// An Engine holds the compiled guards of every tenant and upstream.
type Engine struct {
	opts Options
	// upstream holds, per upstream, the set of its own guards (and its
	// secrets), for tenants with no guards of their own.
	upstream map[string]*Set
	// tenants holds, per tenant with guards of its own, a set per
	// upstream.
	tenants map[string]map[string]*Set
	// defs are the verdicts on definitions (ledger.go).
	defs ledger
}

// A Set is the guards that apply to one tenant's use of one upstream (and
// one tool). Its methods are safe for concurrent use.
type Set struct {
	e        *Engine
	upstream string
	guards   []*guard
	byPhase  [numPhases][]*guard
	secrets  bool // the upstream has secrets of the gateway's
	// byTool caches the sets of single tools when some guard is for some
	// tools only (nil otherwise); at most maxToolSets of them.
	byTool *sync.Map
	nTool  *atomic.Int32
}

// maxToolSets bounds the per-tool sets a Set caches.
const maxToolSets = 4096

// a guard is one compiled config.Guard.
type guard struct {
	name         string
	phases       [numPhases]bool
	tools        []string
	dets         []detector
	action       Action // 0: each detector's default
	message      string
	maxBytes     int64
	oversizePass bool
	hook         *webhook
}

// Compile compiles the guards of cfg, which must have passed validation.
// The result is immutable; compile again for a new config.
func Compile(cfg *config.Config, o Options) (*Engine, error) {
	e := &Engine{opts: o, upstream: map[string]*Set{}, tenants: map[string]map[string]*Set{}}
	compileList := func(path string, gs []config.Guard) ([]*guard, error) {
		var out []*guard
		for i := range gs {
			g, err := compileGuard(&gs[i], fmt.Sprintf("%s[%d]", path, i), o)
			if err != nil {
				return nil, err
			}
			out = append(out, g)
		}
		return out, nil
	}
	upGuards := map[string][]*guard{}
	secrets := map[string]bool{}
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		gs, err := compileList(fmt.Sprintf("upstreams[%d].guards", i), u.Guards)
		if err != nil {
			return nil, err
		}
		upGuards[u.Name] = gs
		secrets[u.Name] = o.Secrets != nil && len(newSecretDetector(o.Secrets(u.Name)).secrets) > 0
		if s := e.newSet(u.Name, gs, secrets[u.Name]); s != nil {
			e.upstream[u.Name] = s
		}
	}
	for i := range cfg.Tenants {
		t := &cfg.Tenants[i]
		own, err := compileList(fmt.Sprintf("tenants[%d].guards", i), t.Guards)
		if err != nil {
			return nil, err
		}
		per := map[string][]*guard{}
		for k := range t.Upstreams {
			tu := &t.Upstreams[k]
			gs, err := compileList(fmt.Sprintf("tenants[%d].upstreams[%d].guards", i, k), tu.Guards)
			if err != nil {
				return nil, err
			}
			if len(gs) > 0 {
				per[tu.Name] = gs
			}
		}
		if len(own) == 0 && len(per) == 0 {
			continue // the upstreams' own sets serve
		}
		sets := map[string]*Set{}
		for j := range cfg.Upstreams {
			name := cfg.Upstreams[j].Name
			all := slices.Concat(upGuards[name], own, per[name])
			if s := e.newSet(name, all, secrets[name]); s != nil {
				sets[name] = s
			}
		}
		e.tenants[t.ID] = sets
	}
	return e, nil
}

// newSet returns the set of gs for upstream, or nil when it would do
// nothing.
func (e *Engine) newSet(upstream string, gs []*guard, secrets bool) *Set {
	if len(gs) == 0 && !secrets {
		return nil
	}
	s := &Set{e: e, upstream: upstream, guards: gs, secrets: secrets}
	for _, g := range gs {
		if g.tools != nil && s.byTool == nil {
			s.byTool, s.nTool = new(sync.Map), new(atomic.Int32)
		}
		for p := range numPhases {
			if g.phases[p] {
				s.byPhase[p] = append(s.byPhase[p], g)
			}
		}
	}
	return s
}

// For returns the guards that apply to tenant's use of upstream's tool
// (its original name; "" for a prompt, a resource or a list of them), or
// nil when none does.
func (e *Engine) For(tenant, upstream, tool string) *Set {
	if e == nil {
		return nil
	}
	var s *Set
	if sets, ok := e.tenants[tenant]; ok {
		s = sets[upstream]
	} else {
		s = e.upstream[upstream]
	}
	if s == nil || s.byTool == nil {
		return s
	}
	return s.forTool(tool)
}

// forTool returns the set of s's guards that apply to tool.
func (s *Set) forTool(tool string) *Set {
	if v, ok := s.byTool.Load(tool); ok {
		return v.(*Set)
	}
	var gs []*guard
	for _, g := range s.guards {
		if g.tools == nil || tool != "" && matchAny(g.tools, tool) {
			gs = append(gs, g)
		}
	}
	t := s.e.newSet(s.upstream, gs, s.secrets)
	if t != nil {
		t.byTool = nil
	}
	if s.nTool.Add(1) <= maxToolSets {
		s.byTool.Store(tool, t)
	}
	return t
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if glob.Match(p, name) {
			return true
		}
	}
	return false
}

// Has reports whether s inspects phase p: when not, the caller may skip
// asking (the methods then return their content as it is).
func (s *Set) Has(p Phase) bool {
	return s != nil && (len(s.byPhase[p]) > 0 || p == Results && s.secrets)
}

// The content handed to Arguments, Result and Definition must be a JSON
// object the gateway has checked (jsonx.Valid) and must not change while
// it is inspected (strings are read in place). A message that holds
// nothing any detector could start a match at is passed without being
// parsed.

// Arguments inspects a tools/call's arguments (a JSON object, after fixed
// arguments are set). It returns the arguments to send (args itself when
// nothing changed; nil when blocked) and the verdict: on Block, the
// upstream must not be called, and Verdict.Message is for the model.
func (s *Set) Arguments(ctx context.Context, in *Input, args json.RawMessage) (json.RawMessage, Verdict) {
	return s.run(ctx, in, Arguments, args)
}

// Result inspects a result: a CallToolResult (its text content blocks,
// the text of embedded resources and the string values of
// structuredContent), a prompts/get result (its messages' text and its
// description) or a resources/read result (its text contents). It returns
// the result to forward (res itself when nothing changed; nil when
// blocked: answer with an error result holding Verdict.Message).
func (s *Set) Result(ctx context.Context, in *Input, res json.RawMessage) (json.RawMessage, Verdict) {
	return s.run(ctx, in, Results, res)
}

// Definition inspects one tool, prompt or resource definition: its
// description and title, its annotations, and the string values of its
// inputSchema, outputSchema and (prompts) arguments. It returns the
// definition to list (def itself when nothing changed) and the verdict:
// on Block, the definition is to be quarantined (hidden and uncallable).
func (s *Set) Definition(ctx context.Context, in *Input, def json.RawMessage) (json.RawMessage, Verdict) {
	return s.run(ctx, in, Definitions, def)
}

// A scanner is one detector of one guard, with the action its findings
// take.
type scanner struct {
	det    detector
	action Action
	g      *guard // nil for the gateway's secrets
	strip  bool   // Redact removes the match (hidden text)
}

// run inspects content of phase p.
func (s *Set) run(ctx context.Context, in *Input, p Phase, content json.RawMessage) (json.RawMessage, Verdict) {
	if !s.Has(p) {
		return content, Verdict{}
	}
	r := &runner{s: s, in: in, phase: p}
	defer r.report()
	// The gateway checked the message's JSON when it arrived (jsonx.Valid);
	// the walk reads its structure again and refuses what it cannot.
	if i := ws(content, 0); i == len(content) || content[i] != '{' {
		r.add(nil, "invalid-json", Block, 1)
		return nil, r.block("it is not valid JSON")
	}
	esc := hasEscapes(content)
	var stage1, stage2 []scanner
	if p == Results && s.secrets {
		if d := newSecretDetector(s.e.opts.Secrets(s.upstream)); d.present(content, esc) {
			stage2 = append(stage2, scanner{det: d, action: Redact})
		}
	}
	var hooks []*guard
	var lits uint64
	litsDone := esc
	for _, g := range s.byPhase[p] {
		if int64(len(content)) > g.maxBytes {
			if g.oversizePass {
				r.add(g, "oversize", Flag, 1)
				continue
			}
			r.add(g, "oversize", Block, 1)
			return nil, r.block(fmt.Sprintf("it is larger (%d bytes) than the gateway inspects (%d bytes)", len(content), g.maxBytes))
		}
		if g.hook != nil {
			hooks = append(hooks, g)
			continue
		}
		for _, d := range g.dets {
			if ld, ok := d.(*litDetector); ok {
				if !litsDone {
					lits, litsDone = litsIn(content), true
				}
				if ld = ld.narrow(lits, esc); len(ld.rules) == 0 {
					continue
				}
				d = ld
			} else if !d.present(content, esc) {
				continue
			}
			sc := scanner{det: d, action: g.action, g: g}
			if sc.action == Pass {
				sc.action = defaultAction(d)
			}
			_, hidden := d.(*hiddenDetector)
			sc.strip = hidden
			if hidden && sc.action == Redact {
				stage1 = append(stage1, sc) // stripped before the others look
			} else {
				stage2 = append(stage2, sc)
			}
		}
	}
	out := content
	if len(stage1)+len(stage2) > 0 {
		r.scanners = append(stage1, stage2...)
		r.nStage1 = len(stage1)
		var err error
		out, err = walk(p, content, r.inspect)
		switch {
		case err != nil:
			r.add(nil, "invalid-json", Block, 1)
			return nil, r.block("it is not JSON the gateway can read")
		case r.overflow:
			r.add(nil, "too-many-findings", Block, 1)
			return nil, r.block(fmt.Sprintf("it holds more than %d findings", maxMatches))
		case r.blocked:
			return nil, r.block("")
		}
	}
	for _, g := range hooks {
		var blocked bool
		out, blocked = r.ask(ctx, g, out)
		if blocked {
			return nil, r.v
		}
	}
	return out, r.v
}

// defaultAction is the action of a detector's findings when its guard
// sets none: flag for instructions, redact for the rest.
func defaultAction(d detector) Action {
	if _, ok := d.(*phraseDetector); ok {
		return Flag
	}
	return Redact
}

// A runner inspects one message.
type runner struct {
	s        *Set
	in       *Input
	phase    Phase
	scanners []scanner
	nStage1  int
	ms       []match
	total    int
	overflow bool
	blocked  bool
	// blockKinds are the kinds that blocked, for the message.
	blockKinds []string
	blockGuard *guard
	v          Verdict
}

// inspect runs the scanners on one string and returns it redacted.
func (r *runner) inspect(s string) (string, bool) {
	if r.overflow || r.blocked {
		return s, false
	}
	orig := s
	changed := false
	if r.nStage1 > 0 {
		if t, ok := r.apply(s, r.scanners[:r.nStage1]); ok {
			s, changed = t, true
		}
	}
	if t, ok := r.apply(s, r.scanners[r.nStage1:]); ok {
		s, changed = t, true
	}
	if r.blocked || r.overflow || !changed {
		return orig, false
	}
	return s, true
}

// apply runs scs on s, records their findings, and returns s with the
// redactions made, and whether there were any.
func (r *runner) apply(s string, scs []scanner) (string, bool) {
	ms := r.ms[:0]
	for i := range scs {
		n0 := len(ms)
		ms = scs[i].det.find(s, ms, maxMatches-r.total+1)
		for j := n0; j < len(ms); j++ {
			ms[j].sc = i
		}
		if r.total+len(ms) > maxMatches {
			r.overflow = true
			r.ms = ms
			return s, false
		}
	}
	r.ms = ms
	if len(ms) == 0 {
		return s, false
	}
	r.total += len(ms)
	for _, m := range ms {
		sc := &scs[m.sc]
		r.add(sc.g, m.kind, sc.action, 1)
		if sc.action == Block {
			r.blocked = true
			if !slices.Contains(r.blockKinds, m.kind) {
				r.blockKinds = append(r.blockKinds, m.kind)
			}
			if r.blockGuard == nil {
				r.blockGuard = sc.g
			}
		}
	}
	if r.blocked {
		return s, false
	}
	return redact(s, ms, func(m *match) (marker string, ok bool) {
		sc := &scs[m.sc]
		if sc.action != Redact {
			return "", false
		}
		if sc.strip {
			return "", true
		}
		return "[redacted:" + m.kind + "]", true
	})
}

// redact returns s with the spans of ms that mark says to replace
// replaced by their marker; overlapping spans are merged and get the
// marker of the first (by start) that has a non-empty one. ms is sorted
// in place. The result is at most len(s) + n*M bytes long, n the number
// of spans replaced and M the longest marker.
func redact(s string, ms []match, mark func(*match) (string, bool)) (string, bool) {
	slices.SortFunc(ms, func(a, b match) int {
		if a.start != b.start {
			return a.start - b.start
		}
		return b.end - a.end
	})
	var b strings.Builder
	done := 0 // s[:done] is written
	changed := false
	for i := 0; i < len(ms); {
		m := &ms[i]
		marker, ok := mark(m)
		if !ok {
			i++
			continue
		}
		start, end := max(m.start, done), m.end
		// Merge every later replaced span that overlaps this one.
		j := i + 1
		for ; j < len(ms) && ms[j].start < end; j++ {
			if mk, ok := mark(&ms[j]); ok {
				end = max(end, ms[j].end)
				if marker == "" {
					marker = mk
				}
			}
		}
		i = j
		if end <= start {
			continue
		}
		if !changed {
			b.Grow(len(s) + 32)
			changed = true
		}
		b.WriteString(s[done:start])
		b.WriteString(marker)
		done = end
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[done:])
	return b.String(), true
}

// add records a finding of guard g (nil: the gateway itself).
func (r *runner) add(g *guard, kind string, a Action, n int) {
	name := "gateway"
	if g != nil {
		name = g.name
	}
	if a > r.v.Action {
		r.v.Action = a
	}
	for i := range r.v.Findings {
		f := &r.v.Findings[i]
		if f.Guard == name && f.Kind == kind && f.Action == a {
			f.Count += n
			return
		}
	}
	r.v.Findings = append(r.v.Findings, Finding{Guard: name, Kind: kind, Phase: r.phase, Action: a, Count: n})
}

// block ends the verdict as a block: why (when "", the kinds that
// blocked) goes in the message.
func (r *runner) block(why string) Verdict {
	r.v.Action = Block
	if why == "" {
		why = "it holds " + strings.Join(r.blockKinds, ", ")
	}
	var msg string
	switch r.phase {
	case Arguments:
		msg = "The gateway's content guard refused this call's arguments: " + why +
			". Call again without it; do not retry with the same content."
	case Results:
		msg = "The gateway's content guard withheld this result: " + why + "."
	default:
		msg = "The gateway's content guard quarantined this definition: " + why + "."
	}
	if g := r.blockGuard; g != nil && g.message != "" {
		msg += " " + g.message
	}
	r.v.Message = msg
	return r.v
}

// report hands the findings to OnFinding.
func (r *runner) report() {
	if f := r.s.e.opts.OnFinding; f != nil {
		for _, fd := range r.v.Findings {
			f(r.in, fd)
		}
	}
}

// compileGuard compiles one guard at path.
func compileGuard(c *config.Guard, path string, o Options) (*guard, error) {
	g := &guard{name: c.Name, tools: c.Tools, message: c.Message, maxBytes: c.MaxBytes, oversizePass: c.Oversize == config.GuardPass}
	if g.name == "" {
		g.name = path
	}
	if g.maxBytes <= 0 {
		g.maxBytes = config.DefaultGuardMaxBytes
	}
	switch c.Action {
	case config.GuardRedact:
		g.action = Redact
	case config.GuardBlock:
		g.action = Block
	case config.GuardFlag:
		g.action = Flag
	}
	if c.Webhook != nil {
		h, err := newWebhook(c.Webhook, path+".webhook", g.name, o)
		if err != nil {
			return nil, err
		}
		g.hook = h
	}
	onlyInstructions := len(c.Detect) > 0 && len(c.Patterns) == 0
	pii := &piiDetector{}
	hidden := &hiddenDetector{}
	seen := map[string]bool{}
	for _, name := range c.Detect {
		kinds, ok := config.GuardKinds(name)
		if !ok {
			return nil, fmt.Errorf("%s: unknown detector %q", path, name)
		}
		if name != config.GuardInstructions {
			onlyInstructions = false
		}
		for _, k := range kinds {
			if seen[k] {
				continue
			}
			seen[k] = true
			switch k {
			case "email":
				pii.email = true
			case "phone":
				pii.phone = true
			case "payment-card":
				pii.card = true
			case "iban":
				pii.iban = true
			case "tag-characters":
				hidden.tags = true
			case "bidi-control":
				hidden.bidi = true
			case "zero-width":
				hidden.zeroWidth = true
			case "ansi-escape":
				hidden.ansi = true
			case "instructions":
				phrases := c.Phrases
				if phrases == nil {
					phrases = defaultPhrases
				}
				g.dets = append(g.dets, newPhraseDetector(phrases))
			case "private-key":
				g.dets = append(g.dets, pemDetector{})
			default:
				rules := credentialRules[k]
				if rules == nil {
					return nil, fmt.Errorf("%s: no detector for kind %q", path, k)
				}
				g.dets = append(g.dets, &litDetector{kind: k, rules: rules})
			}
		}
	}
	if len(hidden.kinds()) > 0 {
		g.dets = append([]detector{hidden}, g.dets...)
	}
	if len(pii.kinds()) > 0 {
		g.dets = append(g.dets, pii)
	}
	for i, pt := range c.Patterns {
		re, err := compileRegexp(pt.Regexp)
		if err != nil {
			return nil, fmt.Errorf("%s.patterns[%d].regexp: %w", path, i, err)
		}
		g.dets = append(g.dets, &reDetector{kind: pt.Kind, re: re})
	}
	if c.Phases == nil {
		for p := range numPhases {
			g.phases[p] = !onlyInstructions || p == Definitions
		}
	}
	for _, ph := range c.Phases {
		switch ph {
		case config.GuardPhaseArguments:
			g.phases[Arguments] = true
		case config.GuardPhaseResults:
			g.phases[Results] = true
		case config.GuardPhaseDefinitions:
			g.phases[Definitions] = true
		}
	}
	return g, nil
}
