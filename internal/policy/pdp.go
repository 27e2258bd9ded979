package policy

import (
	"bytes"
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/tenant"
)

// The AuthZEN 1.0 Access Evaluation API paths, under policy.pdp.url.
const (
	EvaluationPath  = "/access/v1/evaluation"
	EvaluationsPath = "/access/v1/evaluations"
)

// maxPDPResponse bounds the body of a PDP's answer.
const maxPDPResponse = 1 << 20

// PDPEvent is one request to the PDP, for metrics.
type PDPEvent struct {
	// Evaluations is how many decisions it asked for (1, or a batch's).
	Evaluations int
	Duration    time.Duration
	// Err is why it failed; nil when the PDP answered.
	Err error
}

// The AuthZEN request and response shapes (Authorization API 1.0,
// sections 5 to 7). Subject, action and resource are required in a
// single evaluation; in a batch, the top-level ones are defaults each
// evaluation may override.
type (
	// Subject is the principal.
	Subject struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Properties map[string]any `json:"properties,omitempty"`
	}
	// Action is the MCP method.
	Action struct {
		Name string `json:"name"`
	}
	// Resource is the tool, prompt or resource.
	Resource struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Properties map[string]any `json:"properties,omitempty"`
	}
	// EvaluationRequest is the body of POST /access/v1/evaluation, and
	// one item of a batch.
	EvaluationRequest struct {
		Subject  *Subject       `json:"subject,omitempty"`
		Action   *Action        `json:"action,omitempty"`
		Resource *Resource      `json:"resource,omitempty"`
		Context  map[string]any `json:"context,omitempty"`
	}
	// EvaluationsRequest is the body of POST /access/v1/evaluations.
	EvaluationsRequest struct {
		EvaluationRequest
		Evaluations []EvaluationRequest `json:"evaluations"`
		Options     map[string]any      `json:"options,omitempty"`
	}
	// EvaluationResponse is the PDP's answer to one evaluation.
	EvaluationResponse struct {
		Decision *bool          `json:"decision"`
		Context  map[string]any `json:"context,omitempty"`
	}
	// EvaluationsResponse is the PDP's answer to a batch, in its order.
	EvaluationsResponse struct {
		Evaluations []EvaluationResponse `json:"evaluations"`
	}
)

// Resource types the gateway sends, by kind.
var resourceTypes = [...]string{tenant.Tool: "mcp_tool", tenant.Prompt: "mcp_prompt", tenant.Resource: "mcp_resource"}

type pdpClient struct {
	base     string
	headers  map[string]string
	client   *http.Client
	timeout  time.Duration
	cache    *decisionCache
	flight   singleflight.Group
	onEvent  func(PDPEvent)
	onHit    func()
	counters *counters
}

// hit counts a decision answered from the cache.
func (p *pdpClient) hit() {
	p.counters.pdpHits.Add(1)
	if p.onHit != nil {
		p.onHit()
	}
}

// A TokenSource is the gateway's own credentials for the PDP: a
// credentials.Source is one.
type TokenSource interface {
	Apply(ctx context.Context, h http.Header) error
	Invalidate(ctx context.Context) bool
}

// tokenTransport sets the gateway's token on each request to the PDP; a
// 401 makes the source fetch a new one for the next.
type tokenTransport struct {
	next http.RoundTripper
	src  TokenSource
}

func (t *tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if err := t.src.Apply(r.Context(), r.Header); err != nil {
		return nil, err
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.src.Invalidate(r.Context())
	}
	return resp, err
}

func newPDPClient(p *config.PolicyPDP, o Options, c *counters) (*pdpClient, error) {
	pc := &pdpClient{
		base:     strings.TrimSuffix(p.URL, "/"),
		headers:  maps.Clone(p.Headers),
		client:   o.HTTPClient,
		timeout:  p.Timeout.D(),
		onEvent:  o.OnPDP,
		onHit:    o.OnCacheHit,
		counters: c,
	}
	if pc.client == nil {
		var err error
		if pc.client, err = p.TLS.HTTPClient(); err != nil {
			return nil, err
		}
	}
	if o.Token != nil {
		hc := *pc.client
		next := hc.Transport
		if next == nil {
			next = http.DefaultTransport
		}
		hc.Transport = &tokenTransport{next: next, src: o.Token}
		pc.client = &hc
	}
	if pc.timeout <= 0 {
		pc.timeout = config.DefaultPDPTimeout.D()
	}
	ttl, size := p.CacheTTL.D(), p.CacheSize
	if ttl <= 0 {
		ttl = config.DefaultPDPCacheTTL.D()
	}
	if size <= 0 {
		size = config.DefaultPDPCacheSize
	}
	pc.cache = newDecisionCache(ttl, size, &c.pdpEvicted)
	return pc, nil
}

// request builds the evaluation of st for rule r.
func (e *Engine) request(st *state, r *rule) (EvaluationRequest, error) {
	in, p := st.in, st.in.Principal
	props := map[string]any{"tenant": p.Tenant}
	if c := st.clientID(); c != "" {
		props["client_id"] = c
	}
	if p.Scopes != nil {
		props["scopes"] = p.Scopes
	}
	if g := st.groups(); g != nil {
		props["groups"] = g
	}
	if p.Claims != nil {
		props["claims"] = p.Claims
	}
	rt := "mcp_item"
	if int(in.Kind) < len(resourceTypes) {
		rt = resourceTypes[in.Kind]
	}
	id := p.Subject
	if id == "" {
		id = "anonymous"
	}
	req := EvaluationRequest{
		Subject: &Subject{Type: "user", ID: id, Properties: props},
		Action:  &Action{Name: in.Method},
		Resource: &Resource{Type: rt, ID: in.Upstream + "/" + in.Original, Properties: map[string]any{
			"upstream": in.Upstream, "name": in.Name, "original_name": in.Original,
		}},
	}
	if r.pdpArgs {
		args, err := st.arguments(argNeed{all: true})
		if err != nil {
			return req, err
		}
		req.Context = map[string]any{"arguments": args}
	}
	return req, nil
}

// askPDP asks the PDP for the decision rule r leaves to it.
func (e *Engine) askPDP(ctx context.Context, st *state, r *rule, ph Phase) Decision {
	req, err := e.request(st, r)
	var allow bool
	if err == nil {
		allow, err = e.pdp.evaluate(ctx, &req)
	}
	return pdpDecision(st, r, ph, allow, err)
}

func pdpDecision(st *state, r *rule, ph Phase, allow bool, err error) Decision {
	st.miss = nil
	if err != nil {
		d := r.decision(st, r.failOpen, ph, ByPDP)
		d.Err = err
		return d
	}
	return r.decision(st, allow, ph, ByPDP)
}

// askPDPBatch asks the PDP, in one request, for the decisions rules
// leave to it, one per state.
func (e *Engine) askPDPBatch(ctx context.Context, states []*state, rules []*rule) []Decision {
	out := make([]Decision, len(states))
	reqs := make([]*EvaluationRequest, len(states))
	errs := make([]error, len(states))
	for i, st := range states {
		req, err := e.request(st, rules[i])
		reqs[i], errs[i] = &req, err
	}
	allows := e.pdp.evaluateBatch(ctx, reqs, errs)
	for i, st := range states {
		out[i] = pdpDecision(st, rules[i], PhaseList, allows[i], errs[i])
	}
	return out
}

func cacheKey(req *EvaluationRequest) ([32]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return [32]byte{}, errors.New("pdp: the request cannot be encoded")
	}
	return sha256.Sum256(b), nil
}

// evaluate asks for one decision: from the cache, else from the PDP (one
// request for concurrent identical ones).
func (p *pdpClient) evaluate(ctx context.Context, req *EvaluationRequest) (bool, error) {
	key, err := cacheKey(req)
	if err != nil {
		return false, err
	}
	if allow, ok := p.cache.get(key); ok {
		p.hit()
		return allow, nil
	}
	v, err, _ := p.flight.Do(string(key[:]), func() (any, error) {
		var resp EvaluationResponse
		if err := p.post(ctx, EvaluationPath, req, &resp, 1); err != nil {
			return false, err
		}
		if resp.Decision == nil {
			p.counters.pdpErrors.Add(1)
			return false, errors.New("pdp: the answer has no decision")
		}
		p.cache.put(key, holderOf(req), *resp.Decision)
		return *resp.Decision, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// evaluateBatch asks for the decisions of reqs whose errs entry is nil,
// from the cache or in one request, and sets errs for those it could
// not get.
func (p *pdpClient) evaluateBatch(ctx context.Context, reqs []*EvaluationRequest, errs []error) []bool {
	allows := make([]bool, len(reqs))
	keys := make([][32]byte, len(reqs))
	var ask []int
	for i, req := range reqs {
		if errs[i] != nil {
			continue
		}
		key, err := cacheKey(req)
		if err != nil {
			errs[i] = err
			continue
		}
		keys[i] = key
		if allow, ok := p.cache.get(key); ok {
			p.hit()
			allows[i] = allow
			continue
		}
		ask = append(ask, i)
	}
	if len(ask) == 0 {
		return allows
	}
	// The subject and action are the same for a list's items: sent once,
	// as the batch's defaults.
	body := EvaluationsRequest{
		EvaluationRequest: EvaluationRequest{Subject: reqs[ask[0]].Subject, Action: reqs[ask[0]].Action},
		Options:           map[string]any{"evaluations_semantic": "execute_all"},
	}
	for _, i := range ask {
		item := EvaluationRequest{Resource: reqs[i].Resource, Context: reqs[i].Context}
		if !sameSubject(reqs[i].Subject, body.Subject) {
			item.Subject = reqs[i].Subject
		}
		if reqs[i].Action.Name != body.Action.Name {
			item.Action = reqs[i].Action
		}
		body.Evaluations = append(body.Evaluations, item)
	}
	var resp EvaluationsResponse
	err := p.post(ctx, EvaluationsPath, &body, &resp, len(ask))
	if err == nil && len(resp.Evaluations) != len(ask) {
		p.counters.pdpErrors.Add(1)
		err = fmt.Errorf("pdp: %d decisions for %d evaluations", len(resp.Evaluations), len(ask))
	}
	for j, i := range ask {
		switch {
		case err != nil:
			errs[i] = err
		case resp.Evaluations[j].Decision == nil:
			errs[i] = errors.New("pdp: an evaluation's answer has no decision")
		default:
			allows[i] = *resp.Evaluations[j].Decision
			p.cache.put(keys[i], holderOf(reqs[i]), allows[i])
		}
	}
	return allows
}

func sameSubject(a, b *Subject) bool { return a == b }

// post sends one request to the PDP and decodes its answer. Its errors
// name neither the URL nor the headers.
func (p *pdpClient) post(ctx context.Context, path string, body, out any, n int) (err error) {
	p.counters.pdpRequests.Add(1)
	start := time.Now()
	defer func() {
		if err != nil {
			p.counters.pdpErrors.Add(1)
		}
		if p.onEvent != nil {
			p.onEvent(PDPEvent{Evaluations: n, Duration: time.Since(start), Err: err})
		}
	}()
	b, err := json.Marshal(body)
	if err != nil {
		return errors.New("pdp: the request cannot be encoded")
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+path, bytes.NewReader(b))
	if err != nil {
		return errors.New("pdp: bad request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	for k, v := range p.headers {
		req.Header.Set(k, v)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pdp: no answer within %s", p.timeout)
		}
		return errors.New("pdp: request failed")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("pdp: HTTP status %d", resp.StatusCode)
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, maxPDPResponse))
	if err := dec.Decode(out); err != nil {
		return errors.New("pdp: the answer is not a valid AuthZEN response")
	}
	return nil
}

// A decisionCache keeps PDP decisions for a time, at most size of them.
// All tenants share it, so when it is full the entry that goes is not
// simply the oldest: a principal holding a quarter of it or more loses
// its own oldest; otherwise the tenant holding the most loses its oldest.
// A principal flooding it with distinct requests churns its own entries,
// not another tenant's.
type decisionCache struct {
	ttl     time.Duration
	size    int
	evicted interface{ Add(uint64) uint64 }

	mu         sync.Mutex
	entries    map[[32]byte]*cacheEntry
	tenants    map[string]*list.List // of *cacheEntry, oldest first; no empty lists
	principals map[string]*list.List // the same, by principal
}

type cacheEntry struct {
	key               [32]byte
	allow             bool
	expires           time.Time
	tenant, principal string
	tel, pel          *list.Element // in tenants[tenant], principals[principal]
}

// A holder is who a cached decision is counted against.
type holder struct{ tenant, principal string }

// holderOf returns the tenant and principal of an evaluation.
func holderOf(req *EvaluationRequest) holder {
	var h holder
	if req.Subject != nil {
		h.tenant, _ = req.Subject.Properties["tenant"].(string)
		h.principal = h.tenant + "\x00" + req.Subject.ID
	}
	return h
}

func newDecisionCache(ttl time.Duration, size int, evicted interface{ Add(uint64) uint64 }) *decisionCache {
	return &decisionCache{ttl: ttl, size: size, evicted: evicted,
		entries: make(map[[32]byte]*cacheEntry), tenants: make(map[string]*list.List), principals: make(map[string]*list.List)}
}

func (c *decisionCache) get(key [32]byte) (bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ent, ok := c.entries[key]
	if !ok {
		return false, false
	}
	if !time.Now().Before(ent.expires) {
		c.remove(ent)
		return false, false
	}
	return ent.allow, true
}

func (c *decisionCache) put(key [32]byte, h holder, allow bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ent, ok := c.entries[key]; ok {
		c.remove(ent)
	}
	if len(c.entries) >= c.size {
		c.remove(c.victim(h))
		c.evicted.Add(1)
	}
	ent := &cacheEntry{key: key, allow: allow, expires: time.Now().Add(c.ttl), tenant: h.tenant, principal: h.principal}
	ent.tel = pushBack(c.tenants, h.tenant, ent)
	ent.pel = pushBack(c.principals, h.principal, ent)
	c.entries[key] = ent
}

func pushBack(m map[string]*list.List, k string, ent *cacheEntry) *list.Element {
	l := m[k]
	if l == nil {
		l = list.New()
		m[k] = l
	}
	return l.PushBack(ent)
}

func removeFrom(m map[string]*list.List, k string, el *list.Element) {
	l := m[k]
	l.Remove(el)
	if l.Len() == 0 {
		delete(m, k)
	}
}

// victim returns the entry to drop for h's: h's principal's oldest when
// it holds its share, else the oldest of the tenant holding the most.
func (c *decisionCache) victim(h holder) *cacheEntry {
	if l := c.principals[h.principal]; l != nil && l.Len() >= max(1, c.size/4) {
		return l.Front().Value.(*cacheEntry)
	}
	var most *list.List
	for _, l := range c.tenants {
		if most == nil || l.Len() > most.Len() {
			most = l
		}
	}
	return most.Front().Value.(*cacheEntry)
}

func (c *decisionCache) remove(ent *cacheEntry) {
	delete(c.entries, ent.key)
	removeFrom(c.tenants, ent.tenant, ent.tel)
	removeFrom(c.principals, ent.principal, ent.pel)
}

// len returns the decisions kept, expired ones included.
func (c *decisionCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
