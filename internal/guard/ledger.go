package guard

import (
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Definition verdicts. A definition is inspected when its listing is
// fetched; a call that resolves to an item asks whether its definition is
// blocked, which the engine remembers, per exact text, for the life of the
// config generation (one Engine), so that calls do not inspect it again.
// Blocked definitions are also kept as notes for /readyz and explain.

const (
	// MaxRemembered bounds the definitions whose verdict an engine
	// remembers; past it, a call inspects its definition each time.
	MaxRemembered = 65536
	// MaxQuarantined bounds the blocked definitions an engine keeps
	// notes of; past it they are counted in metrics only.
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

type ledger struct {
	verdicts sync.Map // DefinitionKey → blocked bool
	count    atomic.Int64

	mu          sync.Mutex
	quarantined []Quarantined
}

// Blocked returns the verdict remembered for k, and whether there is one.
func (e *Engine) Blocked(k DefinitionKey) (blocked, known bool) {
	v, ok := e.defs.verdicts.Load(k)
	if !ok {
		return false, false
	}
	return v.(bool), true
}

// Remember keeps the verdict on k, while fewer than MaxRemembered are.
func (e *Engine) Remember(k DefinitionKey, blocked bool) {
	if e.defs.count.Add(1) <= MaxRemembered {
		e.defs.verdicts.Store(k, blocked)
	}
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
	e.defs.mu.Lock()
	defer e.defs.mu.Unlock()
	if len(e.defs.quarantined) < MaxQuarantined && !slices.Contains(e.defs.quarantined, q) {
		e.defs.quarantined = append(e.defs.quarantined, q)
	}
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
