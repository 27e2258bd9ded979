package catalog

import (
	"strings"

	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/tenant"
)

// The four kinds of list (tools, prompts, resources, resource
// templates), what the protocol says of each, and how each names its items
// in the gateway's namespace.

// Kind is one of the four list kinds.
type Kind int

const (
	Tools Kind = iota
	Prompts
	Resources
	Templates
)

// Info is what the protocol says of one kind of list.
type Info struct {
	ListMethod string // the upstream method that lists this kind
	Field      string // the result member holding the items
	Key        string // the item member the gateway rewrites
	Capability string // the server capability that enables it
	URI        bool   // Key is a URI (namespaced with "+"), not a name
	Noun       string
	// Changed is the notification that a list of this kind changed.
	Changed string
}

var kinds = [...]Info{
	Tools:     {protocol.MethodToolsList, "tools", "name", "tools", false, "tool", protocol.NotifyToolsListChanged},
	Prompts:   {protocol.MethodPromptsList, "prompts", "name", "prompts", false, "prompt", protocol.NotifyPromptsListChanged},
	Resources: {protocol.MethodResourcesList, "resources", "uri", "resources", true, "resource", protocol.NotifyResourcesListChanged},
	Templates: {protocol.MethodResourceTemplatesList, "resourceTemplates", "uriTemplate", "resources", true, "resource template", protocol.NotifyResourcesListChanged},
}

// Kinds are the four kinds, in order.
var Kinds = []Kind{Tools, Prompts, Resources, Templates}

// Info returns what the protocol says of kind k.
func (k Kind) Info() *Info { return &kinds[k] }

// Expose returns the exposed form of an item key for an upstream prefix.
func (k Kind) Expose(prefix, key string) string {
	if kinds[k].URI {
		return ExposedURI(prefix, key)
	}
	return ExposedName(prefix, key)
}

// Owns reports whether an upstream with the given prefix could expose the
// name at all; the catalog consults only those upstreams.
func (k Kind) Owns(prefix, exposed string) bool {
	if prefix == "" {
		return true
	}
	sep := nameSeparator
	if kinds[k].URI {
		sep = uriSeparator
	}
	return strings.HasPrefix(exposed, prefix+sep)
}

// Policy returns the kind of item tenant rules decide of items of kind k:
// templates are decided as the resources they make.
func (k Kind) Policy() tenant.Kind {
	switch k {
	case Tools:
		return tenant.Tool
	case Prompts:
		return tenant.Prompt
	}
	return tenant.Resource
}
