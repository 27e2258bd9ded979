package toolsearch

import (
	"strconv"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// A Call is a tools/call of one of the gateway's own tools, as its
// arguments say: a search (Search, with Query and Limit) or a call of one
// of the tenant's tools (Params: the params of the tools/call it stands
// for, with the caller's _meta).
type Call struct {
	Search bool
	Query  string
	Limit  int
	Params []byte
}

// ParseCall reads a tools/call of own tool name (see IsOwn) whose params
// are p, under tool search ts. A failure is the text of the tool error a
// model can act on; the Call is nil when the arguments are not an object.
func ParseCall(ts *config.ToolSearch, name string, p *jsonx.Object) (*Call, string) {
	args := &jsonx.Object{}
	if a := p.Get("arguments"); len(a) > 0 && string(a) != "null" {
		var err error
		if args, err = jsonx.ParseValidObject(a); err != nil {
			return nil, invalid(name, "arguments must be an object")
		}
	}
	if name == SearchTool {
		c := &Call{Search: true, Limit: ts.MaxResults}
		c.Query, _ = args.GetString("query")
		if c.Query == "" || len(c.Query) > MaxQueryBytes {
			return c, invalid(name, "query must be a string of 1 to "+strconv.Itoa(MaxQueryBytes)+" bytes")
		}
		if l := args.Get("limit"); l != nil {
			if n, err := strconv.Atoi(string(l)); err == nil && n >= 1 && n <= c.Limit {
				c.Limit = n
			}
		}
		return c, ""
	}
	target, _ := args.GetString("name")
	if target == "" || IsOwn(target) {
		return &Call{}, invalid(name, "name must name one of your tools")
	}
	// A tools/call of target, with the caller's _meta: served as if the
	// client had sent it, under every rule.
	inner := &jsonx.Object{}
	inner.SetString("name", target)
	if a := args.Get("arguments"); a != nil {
		inner.Set("arguments", a)
	}
	if m := p.Get("_meta"); m != nil {
		inner.Set("_meta", m)
	}
	return &Call{Params: inner.Bytes()}, ""
}

func invalid(tool, why string) string {
	return "Invalid arguments for tool " + strconv.Quote(tool) + ": " + why
}
