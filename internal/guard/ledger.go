package guard

import (
	"hash/fnv"
	"slices"
	"strings"
	"sync"
)

// Definition verdicts. A definition is inspected when its listing is
// fetched; a call that resolves to an item asks whether its definition is
// blocked, which the engine remembers, per exact text, for the life of the
// config generation (one Engine), so that calls do not inspect it again.
// Blocked definitions are also kept as notes for /readyz and explain.

const (
	// MaxRemembered bounds the definitions whose verdict an engine
	// remembers, one tenant's at most half of them; past it, a call
	// inspects its definition each time.
	MaxRemembered = 65536
	// MaxQuarantined bounds the blocked definitions an engine keeps
	// notes of, one tenant's at most half of them; past it they are
	// counted in metrics only (and still blocked).
	MaxQuarantined = 256
)

// A DefinitionKey names one definition as one tenant sees it, by the
// hash of its text: a changed definition is inspected anew.
type DefinitionKey struct {
	Tenant, Upstream, Kind, Original string
	sum                              uint64
}

// KeyOf returns the key of definition raw of item original (kind is a
// noun: "tool", "prompt", "resource") on upstream for tenant.
func KeyOf(tenant, upstream, kind, original string, raw []byte) DefinitionKey {
	h := fnv.New64a()
	h.Write(raw)
	return DefinitionKey{Tenant: tenant, Upstream: upstream, Kind: kind, Original: original, sum: h.Sum64()}
}

// A Quarantined is a definition guards blocked for a tenant.
type Quarantined struct {
	Tenant, Upstream, Kind, Original string
	// Found names what blocked it, never the text: "hidden-text,aws-key".
	Found string
}

// All tenants share both tables, so one tenant holds at most half of
// each: an upstream that floods one tenant's lists with definitions
// leaves room for the verdicts and notes of the others.
type ledger struct {
	verdicts sync.Map // DefinitionKey → blocked bool

	mu          sync.Mutex
	remembered  map[string]int // verdicts kept, by tenant
	total       int
	quarantined []Quarantined
	noted       map[string]int // notes kept, by tenant
}

// tenantShare is the part of a table one tenant may hold.
func tenantShare(max int) int { return max / 2 }

// Blocked returns the verdict remembered for k, and whether there is one.
func (e *Engine) Blocked(k DefinitionKey) (blocked, known bool) {
	v, ok := e.defs.verdicts.Load(k)
	if !ok {
		return false, false
	}
	return v.(bool), true
}

// Remember keeps the verdict on k, while fewer than MaxRemembered are
// and k's tenant holds less than half of them.
func (e *Engine) Remember(k DefinitionKey, blocked bool) {
	d := &e.defs
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.verdicts.Load(k); ok {
		return
	}
	if d.total >= MaxRemembered || d.remembered[k.Tenant] >= tenantShare(MaxRemembered) {
		return
	}
	if d.remembered == nil {
		d.remembered = make(map[string]int)
	}
	d.total++
	d.remembered[k.Tenant]++
	d.verdicts.Store(k, blocked)
}

// Quarantine notes that v blocked the definition k.
func (e *Engine) Quarantine(k DefinitionKey, v Verdict) {
	var ks []string
	for _, f := range v.Findings {
		if f.Action == Block && !slices.Contains(ks, f.Kind) {
			ks = append(ks, f.Kind)
		}
	}
	q := Quarantined{Tenant: k.Tenant, Upstream: k.Upstream, Kind: k.Kind, Original: k.Original, Found: strings.Join(ks, ",")}
	d := &e.defs
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.quarantined) >= MaxQuarantined || d.noted[q.Tenant] >= tenantShare(MaxQuarantined) || slices.Contains(d.quarantined, q) {
		return
	}
	if d.noted == nil {
		d.noted = make(map[string]int)
	}
	d.noted[q.Tenant]++
	d.quarantined = append(d.quarantined, q)
}

// Quarantined returns the definitions guards blocked, in the order they
// were found.
func (e *Engine) Quarantined() []Quarantined {
	if e == nil {
		return nil
	}
	e.defs.mu.Lock()
	defer e.defs.mu.Unlock()
	return slices.Clone(e.defs.quarantined)
}
