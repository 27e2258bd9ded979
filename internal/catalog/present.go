package catalog

import (
	"encoding/json"
	"slices"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// Encode returns the result of a list method of kind k holding items, on
// one page: {"<field>":[…]}.
func Encode(k Kind, items []Item) []byte {
	field := kinds[k].Field
	n := 64
	for _, it := range items {
		n += len(it.Raw) + 1
	}
	buf := make([]byte, 0, n)
	buf = append(buf, `{"`...)
	buf = append(buf, field...)
	buf = append(buf, `":[`...)
	for i, it := range items {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, it.Raw...)
	}
	return append(buf, "]}"...)
}

// ListChanged returns the notification that a list of kind k changed.
func ListChanged(k Kind) []byte {
	return jsonrpc.AppendRequest(nil, jsonrpc.ID{}, kinds[k].Changed, nil)
}

// AssertAnnotations overlays admin-asserted annotations on a listed tool:
// each asserted field replaces the upstream's, the others stay as the
// upstream sent them.
func AssertAnnotations(tool json.RawMessage, a config.ToolAnnotations) json.RawMessage {
	o, err := jsonx.ParseValidObject(tool)
	if err != nil {
		return tool
	}
	ann := o.ObjectOr("annotations")
	set := func(name string, v any) {
		b, _ := json.Marshal(v)
		ann.Set(name, b)
	}
	if a.Title != nil {
		set("title", *a.Title)
	}
	if a.ReadOnlyHint != nil {
		set("readOnlyHint", *a.ReadOnlyHint)
	}
	if a.DestructiveHint != nil {
		set("destructiveHint", *a.DestructiveHint)
	}
	if a.IdempotentHint != nil {
		set("idempotentHint", *a.IdempotentHint)
	}
	if a.OpenWorldHint != nil {
		set("openWorldHint", *a.OpenWorldHint)
	}
	o.Set("annotations", ann.Bytes())
	return o.Bytes()
}

// PresentTool returns a listed tool as one tenant is shown it: under name,
// with description if not nil, and without the fixed arguments in its
// inputSchema's properties and required (the gateway sets them). tool is
// shared by every tenant and is not modified.
func PresentTool(tool json.RawMessage, name string, description *string, fixed []string) json.RawMessage {
	o, err := jsonx.ParseValidObject(tool)
	if err != nil {
		return tool
	}
	o.SetString("name", name)
	if description != nil {
		o.SetString("description", *description)
	}
	if len(fixed) > 0 {
		if in, ok := o.Object("inputSchema"); ok {
			if props, ok := in.Object("properties"); ok {
				for _, f := range fixed {
					props.Delete(f)
				}
				in.Set("properties", props.Bytes())
			}
			if req := in.Get("required"); req != nil {
				if elems, err := jsonx.ParseValidArray(req); err == nil {
					kept := elems[:0]
					for _, e := range elems {
						var s string
						if json.Unmarshal(e, &s) == nil && slices.Contains(fixed, s) {
							continue
						}
						kept = append(kept, e)
					}
					in.Set("required", jsonx.AppendArray(nil, kept))
				}
			}
			o.Set("inputSchema", in.Bytes())
		}
	}
	return o.Bytes()
}
