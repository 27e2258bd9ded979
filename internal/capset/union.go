package capset

import "encoding/json"

// An Offer is what is known of one upstream's capabilities, to Union.
type Offer struct {
	// Caps is the upstream's capabilities object, or nil when they are not
	// known (it was never reached): such an upstream is counted as
	// offering every capability, so that it is tried.
	Caps json.RawMessage
	// Subscribe reports that it offers resources.subscribe (in either
	// revision: see subscribe.Offered).
	Subscribe bool
}

// unioned are the capabilities Union announces, in the order it looks for
// them.
var unioned = []string{"tools", "prompts", "resources", "logging", "completions"}

// Union returns the capabilities the gateway announces to a client (in
// initialize's result, or server/discover's) given its upstreams' offers:
// those that at least one of them offers, as far as the gateway delivers
// them. Lists announce listChanged: the gateway sends list_changed on the
// session's GET stream when a reload or an upstream's new list changes
// what the tenant sees, whatever the upstreams announce. logging and
// completions are announced empty. resources.subscribe is announced when
// an upstream offers it and the caller is not stateless (a session's
// updates reach its GET stream; a 2026-07-28 caller subscribes with
// subscriptions/listen instead). Tasks are not its to announce (see
// internal/tasks). The result is the caller's to add to.
func (c *Cache) Union(offers []Offer, stateless bool) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage)
	for _, name := range unioned {
		for _, o := range offers {
			if o.Caps == nil || c.Names(o.Caps)[name] {
				switch name {
				case "tools", "prompts", "resources":
					out[name] = json.RawMessage(`{"listChanged":true}`)
				default:
					out[name] = json.RawMessage(`{}`)
				}
				break
			}
		}
	}
	if out["resources"] != nil && !stateless {
		for _, o := range offers {
			if o.Subscribe {
				out["resources"] = json.RawMessage(`{"listChanged":true,"subscribe":true}`)
				break
			}
		}
	}
	return out
}
