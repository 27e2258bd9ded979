package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// Pinned definitions: an upstream with a pin policy (upstreams[].pin) has
// each tool's and prompt's definition hashed as it is listed and compared
// with the pins file. The hash covers what the model reads of the item,
// in canonical JSON (object keys sorted, numbers as written, no
// insignificant space), so a re-encoding upstream is not a change.

// pinFields are the members of an item of each kind that a pin covers.
var pinFields = map[Kind][]string{
	Tools:   {"name", "title", "description", "inputSchema", "outputSchema", "annotations"},
	Prompts: {"name", "title", "description", "arguments"},
}

// Pinnable reports whether items of kind k are pinned.
func (k Kind) Pinnable() bool { return k == Tools || k == Prompts }

// PinOf returns the pin of raw, an item of kind k as its upstream lists
// it (with its original name). ok is false for an item that is not a
// JSON object or of a kind that is not pinned.
func PinOf(k Kind, raw json.RawMessage) (p config.PinnedItem, ok bool) {
	fields := pinFields[k]
	if fields == nil {
		return p, false
	}
	o, err := jsonx.ParseValidObject(raw)
	if err != nil {
		return p, false
	}
	p.Fields = make(map[string]string, len(fields))
	whole := sha256.New()
	for _, f := range fields { // in a fixed order
		v := o.Get(f)
		if v == nil {
			continue
		}
		sum := sha256.Sum256(canonicalJSON(v))
		h := hex.EncodeToString(sum[:])
		p.Fields[f] = h
		whole.Write([]byte(f + "\x00" + h + "\n"))
	}
	p.SHA256 = hex.EncodeToString(whole.Sum(nil))
	return p, true
}

// canonicalJSON re-encodes v with object keys sorted and numbers kept as
// written; v is valid JSON (the item was parsed).
func canonicalJSON(v json.RawMessage) []byte {
	d := json.NewDecoder(bytes.NewReader(v))
	d.UseNumber()
	var x any
	if d.Decode(&x) != nil {
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(x) != nil {
		return v
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// ChangedFields returns the fields whose hashes differ between a pin and
// the item as listed now: the field-level diff the log and the audit log
// give, bounded by the fixed set of fields.
func ChangedFields(pinned, now config.PinnedItem) []string {
	var out []string
	for f := range pinned.Fields {
		if now.Fields[f] != pinned.Fields[f] {
			out = append(out, f)
		}
	}
	for f := range now.Fields {
		if _, ok := pinned.Fields[f]; !ok {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// PinStatus is how an item's definition stands against its pin.
type PinStatus struct {
	Upstream string
	Kind     Kind
	Name     string // original
	// New says the pins file does not have it; else Changed lists the
	// fields that differ from the pin.
	New     bool
	Changed []string
	// Quarantined says it is hidden and uncallable.
	Quarantined bool
	// SHA256 is the hash of the definition as listed.
	SHA256 string
}

// Describe says what is wrong, for logs, /readyz and explain.
func (s PinStatus) Describe() string {
	what := "changed (" + strings.Join(s.Changed, ", ") + ")"
	if s.New {
		what = "not pinned"
	}
	if s.Quarantined {
		return what + ": quarantined"
	}
	return what
}

// CheckPin compares the item of kind k that up lists as raw, named orig,
// with its pin. It returns the item's hash and, when it does not match, its
// status; quarantined says to leave it out. pol is not nil.
func CheckPin(pol *config.UpstreamPin, upstream string, k Kind, orig string, raw json.RawMessage) (hash string, st *PinStatus) {
	now, ok := PinOf(k, raw)
	if !ok {
		return "", nil
	}
	pins := pol.Pinned().Tools
	if k == Prompts {
		pins = pol.Pinned().Prompts
	}
	pinned, ok := pins[orig]
	switch {
	case !ok:
		st = &PinStatus{New: true, Quarantined: pol.New == config.PinQuarantine}
	case pinned.SHA256 != now.SHA256:
		st = &PinStatus{Changed: ChangedFields(pinned, now), Quarantined: pol.OnChange == config.PinQuarantine}
	default:
		return now.SHA256, nil
	}
	st.Upstream, st.Kind, st.Name, st.SHA256 = upstream, k, orig, now.SHA256
	return now.SHA256, st
}

// PinAllows reports whether a call may use the item it resolved to under
// the pins of pol (nil: no pins): the check at call time, against the
// pins of the request's own config snapshot, of the definition the
// listing served.
func PinAllows(pol *config.UpstreamPin, k Kind, it *Item) bool {
	if pol == nil || !k.Pinnable() {
		return true
	}
	pins := pol.Pinned().Tools
	if k == Prompts {
		pins = pol.Pinned().Prompts
	}
	pinned, ok := pins[it.Original]
	switch {
	case !ok:
		return pol.New != config.PinQuarantine
	case pinned.SHA256 != it.pin:
		return pol.OnChange != config.PinQuarantine
	}
	return true
}

// notePins records the mismatches of a Listing of kind k of upstream just
// built, sets the quarantine metric, and reports those it did not have
// (or had otherwise) to OnPin.
func (c *Catalog) notePins(upstream string, k Kind, ms []PinStatus) {
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].Quarantined && !ms[j].Quarantined })
	e := &pinEntry{}
	for _, m := range ms {
		if m.Quarantined {
			e.quarantined++
		}
	}
	e.items = ms[:min(len(ms), maxPinStatus)]
	key := pinKey{upstream, k}
	c.mu.Lock()
	old := c.pins[key]
	if len(ms) == 0 {
		delete(c.pins, key)
	} else {
		c.pins[key] = e
	}
	c.mu.Unlock()
	c.metrics.QuarantinedItems(upstream, kinds[k].Noun, e.quarantined)
	if c.OnPin == nil {
		return
	}
	for _, m := range ms {
		if old == nil || !old.has(m) {
			c.OnPin(m)
		}
	}
}

func (e *pinEntry) has(m PinStatus) bool {
	return slices.ContainsFunc(e.items, func(o PinStatus) bool {
		return o.Name == m.Name && o.SHA256 == m.SHA256 && o.Quarantined == m.Quarantined
	})
}

// dropPins forgets the mismatches of upstream's listings of kinds ks (its
// config changed: they are listed again). c.mu is held.
func (c *Catalog) dropPins(upstream string, ks ...Kind) {
	for _, k := range ks {
		if c.pins[pinKey{upstream, k}] != nil {
			delete(c.pins, pinKey{upstream, k})
			c.metrics.QuarantinedItems(upstream, kinds[k].Noun, 0)
		}
	}
}

// PinMismatches returns the items whose definitions do not match their
// pins, as last listed, quarantined first, by upstream and kind.
func (c *Catalog) PinMismatches() []PinStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []PinStatus
	for _, e := range c.pins {
		out = append(out, e.items...)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Quarantined != b.Quarantined {
			return a.Quarantined
		}
		if a.Upstream != b.Upstream {
			return a.Upstream < b.Upstream
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Name < b.Name
	})
	return out
}
