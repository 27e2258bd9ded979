package catalog

import "github.com/mcpgw/gateway/internal/tenant"

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
