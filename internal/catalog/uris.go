package catalog

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// Resource URIs inside results.
//
// An upstream with a prefix has its resource URIs exposed as
// prefix+"+"+uri (see [ExposedURI]), and a client reads them back in that
// form. So every place the schema defines a resource URI is rewritten on
// its way through the gateway, out to the exposed form and back in to the
// upstream's own; an upstream without a prefix has its URIs passed as they
// are. The places, in 2025-11-25 and 2026-07-28 schema.json alike:
//
// Upstream to client (exposed):
//   - resources/list resources[].uri and resources/templates/list
//     resourceTemplates[].uriTemplate: the listing's key ([Catalog] build);
//   - tools/list tools[]._meta.ui.resourceUri, the MCP Apps extension's
//     link from a tool to its ui:// view (and its older flat form
//     _meta["ui/resourceUri"]): [ExposeUIMeta], in build;
//   - tools/call CallToolResult.content[] and prompts/get
//     GetPromptResult.messages[].content, each a ContentBlock: a
//     ResourceLink's uri and an EmbeddedResource's resource.uri
//     ([ExposeContentBlocks], [ExposePromptMessages]); and the tool
//     result's _meta.ui.resourceUri, if an upstream puts one there;
//   - resources/read ReadResourceResult.contents[].uri
//     ([ExposeReadResult]) and notifications/resources/updated params.uri
//     ([Catalog.ExposeUpdated]).
//
// Client to upstream (resolved with [Catalog.ResolveURI], which also
// checks the tenant may see it): resources/read, resources/subscribe and
// resources/unsubscribe params.uri, and completion/complete's ref/resource
// uri (internal/dispatch).
//
//   - sampling/createMessage params.messages[].content, a SamplingContent
//     or an array of them: the ContentBlocks of each ToolResultContent
//     ([ExposeSamplingParams]; [ExposeUpstreamRequest], applied by the
//     bridge to every request it forwards).
//
// Not rewritten: a client's CreateMessageResult (the model's answer: a
// ToolResultContent there would hold the client's blocks, not an
// upstream's), and URIs inside free-form values the schema does not type (tool
// arguments, structuredContent, other _meta keys). Root.uri is the
// client's own (roots/list), no upstream's resource; 2026-07-28
// SubscriptionFilter.resourceSubscriptions are not relayed at all (see
// internal/transport serveListen).
//
// An upstream's result is up to 16 MiB, and any of it may be content
// blocks: the rewrites scan arrays without building them
// ([jsonx.EachElement]), parse only the elements that mention a resource,
// and pass every other byte through as it came, so that their memory stays
// within a small multiple of the result's size.

// resourceWord is in every block, _meta and member a rewrite looks at:
// "resource_link", "resource", "resourceUri", "ui/resourceUri". JSON
// without it is passed through unparsed.
var resourceWord = []byte("resource")

// ExposeContentBlocks returns blocks, a JSON array of ContentBlocks, with
// the URIs of its resource_link and resource blocks exposed for prefix,
// and whether anything changed (if not, blocks itself is returned).
// Elements that are not objects are left as they are: upstream output is
// relayed, not judged.
func ExposeContentBlocks(blocks json.RawMessage, prefix string) (json.RawMessage, bool) {
	if prefix == "" || !bytes.Contains(blocks, resourceWord) {
		return blocks, false
	}
	return rewriteElements(blocks, func(block []byte) ([]byte, bool) { return exposeBlock(block, prefix) })
}

// rewriteElements returns arr, a JSON array, with each element that fn
// rewrites (fn's second result true) replaced by fn's first, and whether
// any was; every other byte, and arr itself when none was, stays as it
// came. Only the elements that mention a resource are given to fn.
func rewriteElements(arr []byte, fn func(elem []byte) ([]byte, bool)) ([]byte, bool) {
	var out []byte
	last := 0
	err := jsonx.EachElement(arr, func(start, end int) error {
		elem := arr[start:end]
		if !bytes.Contains(elem, resourceWord) {
			return nil
		}
		b, ok := fn(elem)
		if !ok {
			return nil
		}
		if out == nil {
			out = make([]byte, 0, len(arr)+len(arr)/8)
		}
		out = append(out, arr[last:start]...)
		out = append(out, b...)
		last = end
		return nil
	})
	if err != nil || out == nil {
		return arr, false
	}
	return append(out, arr[last:]...), true
}

// exposeBlock exposes the URI of one ContentBlock, if it is a
// resource_link or an embedded resource.
func exposeBlock(block []byte, prefix string) ([]byte, bool) {
	if prefix == "" || !bytes.Contains(block, resourceWord) {
		return nil, false
	}
	o, err := jsonx.ParseValidObject(block)
	if err != nil {
		return nil, false
	}
	typ, _ := o.GetString("type")
	switch typ {
	case "resource_link":
		u, ok := o.GetString("uri")
		if !ok {
			return nil, false
		}
		o.SetString("uri", ExposedURI(prefix, u))
	case "resource":
		r, ok := o.Object("resource")
		if !ok {
			return nil, false
		}
		u, ok := r.GetString("uri")
		if !ok {
			return nil, false
		}
		r.SetString("uri", ExposedURI(prefix, u))
		o.Set("resource", r.Bytes())
	default:
		return nil, false
	}
	return o.Bytes(), true
}

// ExposePromptMessages returns messages, the JSON array
// GetPromptResult.messages, with the URI of each message's content block
// exposed for prefix (see [ExposeContentBlocks]), and whether anything
// changed.
func ExposePromptMessages(messages json.RawMessage, prefix string) (json.RawMessage, bool) {
	if prefix == "" || !bytes.Contains(messages, resourceWord) {
		return messages, false
	}
	return rewriteElements(messages, func(elem []byte) ([]byte, bool) {
		return rewriteMember(elem, "content", func(c []byte) ([]byte, bool) { return exposeBlock(c, prefix) })
	})
}

// rewriteMember returns obj, a JSON object, with its member name
// rewritten by fn, and whether it was.
func rewriteMember(obj []byte, name string, fn func(v []byte) ([]byte, bool)) ([]byte, bool) {
	o, err := jsonx.ParseValidObject(obj)
	if err != nil {
		return nil, false
	}
	v := o.Get(name)
	if v == nil {
		return nil, false
	}
	b, ok := fn(v)
	if !ok {
		return nil, false
	}
	o.Set(name, b)
	return o.Bytes(), true
}

// ExposeUIMeta returns meta, a _meta object, with the MCP Apps link to a
// UI resource exposed for prefix: ui.resourceUri, and the flat
// "ui/resourceUri" key of earlier drafts. It reports whether anything
// changed (if not, meta itself is returned).
func ExposeUIMeta(meta json.RawMessage, prefix string) (json.RawMessage, bool) {
	if prefix == "" || !bytes.Contains(meta, resourceWord) {
		return meta, false
	}
	o, err := jsonx.ParseValidObject(meta)
	if err != nil {
		return meta, false
	}
	changed := false
	if ui, ok := o.Object("ui"); ok {
		if u, ok := ui.GetString("resourceUri"); ok {
			ui.SetString("resourceUri", ExposedURI(prefix, u))
			o.Set("ui", ui.Bytes())
			changed = true
		}
	}
	if u, ok := o.GetString("ui/resourceUri"); ok {
		o.SetString("ui/resourceUri", ExposedURI(prefix, u))
		changed = true
	}
	if !changed {
		return meta, false
	}
	return o.Bytes(), true
}

// ExposeToolResult returns res, a CallToolResult, with the URIs of its
// content blocks and its _meta's UI link exposed for prefix. Anything else,
// and a result that mentions no resource at all, passes through as it is.
func ExposeToolResult(res json.RawMessage, prefix string) json.RawMessage {
	if prefix == "" || !bytes.Contains(res, resourceWord) {
		return res
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res
	}
	changed := false
	if c, ok := ExposeContentBlocks(o.Get("content"), prefix); ok {
		o.Set("content", c)
		changed = true
	}
	if m, ok := ExposeUIMeta(o.Get("_meta"), prefix); ok {
		o.Set("_meta", m)
		changed = true
	}
	if !changed {
		return res
	}
	return o.Bytes()
}

// ExposePromptResult returns res, a GetPromptResult, with the URIs of its
// messages' content blocks exposed for prefix.
func ExposePromptResult(res json.RawMessage, prefix string) json.RawMessage {
	if prefix == "" || !bytes.Contains(res, resourceWord) {
		return res
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res
	}
	m, ok := ExposePromptMessages(o.Get("messages"), prefix)
	if !ok {
		return res
	}
	o.Set("messages", m)
	return o.Bytes()
}

// ExposeReadResult returns res, a ReadResourceResult, with contents[].uri
// exposed for prefix. The array is scanned, not built: a result of many
// small contents costs no more memory than its bytes.
func ExposeReadResult(res json.RawMessage, prefix string) (json.RawMessage, error) {
	if prefix == "" {
		return res, nil
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return nil, fmt.Errorf("malformed resources/read result: %w", err)
	}
	contents := o.Get("contents")
	if contents == nil {
		return res, nil
	}
	out := make([]byte, 0, len(contents)+len(contents)/8)
	last := 0
	err = jsonx.EachElement(contents, func(start, end int) error {
		eo, err := jsonx.ParseValidObject(contents[start:end])
		if err != nil {
			return nil
		}
		if u, ok := eo.GetString("uri"); ok {
			eo.SetString("uri", ExposedURI(prefix, u))
			out = append(out, contents[last:start]...)
			out = eo.AppendTo(out)
			last = end
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("malformed resources/read contents: %w", err)
	}
	o.Set("contents", append(out, contents[last:]...))
	return o.Bytes(), nil
}

// ExposeSamplingParams returns params, a CreateMessageRequest's, with the
// URIs of the content blocks inside each message's tool results exposed
// for prefix. A message's content is one SamplingContent or an array of
// them; only a tool_result holds ContentBlocks.
func ExposeSamplingParams(params json.RawMessage, prefix string) json.RawMessage {
	if prefix == "" || !bytes.Contains(params, resourceWord) {
		return params
	}
	out, ok := rewriteMember(params, "messages", func(messages []byte) ([]byte, bool) {
		return rewriteElements(messages, func(elem []byte) ([]byte, bool) {
			return rewriteMember(elem, "content", func(c []byte) ([]byte, bool) { return exposeSamplingContent(c, prefix) })
		})
	})
	if !ok {
		return params
	}
	return out
}

// exposeSamplingContent exposes the URIs in one SamplingContent, or in an
// array of them, and reports whether anything changed.
func exposeSamplingContent(c []byte, prefix string) ([]byte, bool) {
	c = bytes.TrimSpace(c)
	if len(c) > 0 && c[0] == '[' {
		return rewriteElements(c, func(elem []byte) ([]byte, bool) { return exposeToolResult(elem, prefix) })
	}
	return exposeToolResult(c, prefix)
}

// exposeToolResult exposes the URIs of the content blocks of a
// tool_result SamplingContent.
func exposeToolResult(block []byte, prefix string) ([]byte, bool) {
	if !bytes.Contains(block, resourceWord) || !bytes.Contains(block, []byte("tool_result")) {
		return nil, false
	}
	o, err := jsonx.ParseValidObject(block)
	if err != nil {
		return nil, false
	}
	if typ, _ := o.GetString("type"); typ != "tool_result" {
		return nil, false
	}
	return rewriteMember(block, "content", func(blocks []byte) ([]byte, bool) { return ExposeContentBlocks(blocks, prefix) })
}
