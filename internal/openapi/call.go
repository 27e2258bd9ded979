package openapi

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// maxExcerpt bounds the part of an error answer's body a result quotes.
const maxExcerpt = 1 << 10

// notForwarded are the headers of the MCP request that are not the REST
// request's: the protocol's own, the body's, and hop-by-hop ones.
var notForwarded = []string{"Accept", "Content-Type", "Content-Length", "Host", "Connection",
	"Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade", "Accept-Encoding",
	"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id"}

// An argError is an argument the request cannot be built from: a tool
// error naming the argument, never quoting its value.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// call sends op's request with the arguments args and the headers of the
// MCP request hdr, and returns the tool result.
func (a *API) call(ctx context.Context, rest *http.Client, maxBody int64, op *operation, args json.RawMessage, hdr http.Header) (json.RawMessage, error) {
	req, err := a.request(ctx, op, args, hdr)
	if err != nil {
		var ae *argError
		if errors.As(err, &ae) {
			return toolError(ae.msg), nil
		}
		return nil, err
	}
	resp, err := rest.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// The error quotes the URL: the caller is told only that the API
		// could not be reached.
		return toolError("The API could not be reached: " + transportReason(err)), nil
	}
	defer resp.Body.Close()
	limit := maxBody
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		limit = min(limit, 4*maxExcerpt) // only an excerpt is quoted
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return toolError("The API's answer was cut off."), nil
	}
	if int64(len(body)) > maxBody && resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return toolError(fmt.Sprintf("The API's answer is larger than %d bytes.", maxBody)), nil
	}
	return result(op, resp, body), nil
}

// transportReason says why the API could not be reached, without naming
// it.
func transportReason(err error) string {
	var ne interface{ Timeout() bool }
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timed out."
	case strings.Contains(err.Error(), "connection refused"):
		return "connection refused."
	case strings.Contains(err.Error(), "certificate"), strings.Contains(err.Error(), "tls:"):
		return "TLS failed."
	}
	return "connection failed."
}

// request builds op's HTTP request.
func (a *API) request(ctx context.Context, op *operation, args json.RawMessage, hdr http.Header) (*http.Request, error) {
	var obj *jsonx.Object
	if len(args) == 0 || string(args) == "null" {
		obj = &jsonx.Object{}
	} else {
		var err error
		// args is part of a message validated whole.
		if obj, err = jsonx.ParseValidObject(args); err != nil {
			return nil, &argError{"The arguments must be a JSON object with distinct names."}
		}
	}
	known := make(map[string]bool, len(op.params)+1)
	for _, p := range op.params {
		known[p.arg] = true
	}
	if op.body {
		known["body"] = true
	}
	for _, m := range obj.Members {
		if !known[m.Name] {
			return nil, &argError{fmt.Sprintf("Unknown argument %q.", truncate(m.Name, 64))}
		}
	}

	path := op.path
	q := url.Values{}
	var rawQuery []string
	extra := http.Header{}
	var cookies []string
	for _, p := range op.params {
		raw := obj.Get(p.arg)
		if raw == nil || string(raw) == "null" {
			if p.required {
				return nil, &argError{fmt.Sprintf("Missing required argument %q.", p.arg)}
			}
			continue
		}
		v, err := decodeValue(raw, p.asJSON)
		if err != nil {
			return nil, &argError{fmt.Sprintf("Argument %q: %v.", p.arg, err)}
		}
		switch p.in {
		case "path":
			// Each value escaped as (part of) one segment: a / in it
			// stays in it, and . or .. cannot walk the API's paths.
			s, err := simpleEscaped(v, p.explode, url.PathEscape)
			if err != nil {
				return nil, &argError{fmt.Sprintf("Argument %q: %v.", p.arg, err)}
			}
			if s == "." || s == ".." || s == "" {
				return nil, &argError{fmt.Sprintf("Argument %q must not be empty, . or ..", p.arg)}
			}
			path = strings.ReplaceAll(path, "{"+p.name+"}", s)
		case "query":
			if err := query(q, &rawQuery, p, v); err != nil {
				return nil, &argError{fmt.Sprintf("Argument %q: %v.", p.arg, err)}
			}
		case "header":
			s, err := simple(v, p.explode)
			if err != nil || strings.ContainsAny(s, "\r\n\x00") {
				return nil, &argError{fmt.Sprintf("Argument %q is not a valid header value.", p.arg)}
			}
			k := http.CanonicalHeaderKey(p.name)
			if len(hdr.Values(k)) > 0 || slices.Contains(notForwarded, k) {
				return nil, &argError{fmt.Sprintf("Argument %q would replace a header the gateway sets.", p.arg)}
			}
			extra.Set(k, s)
		case "cookie":
			s, err := formJoin(v)
			if err != nil || strings.ContainsAny(s, ";\r\n\x00") {
				return nil, &argError{fmt.Sprintf("Argument %q is not a valid cookie value.", p.arg)}
			}
			cookies = append(cookies, p.name+"="+s)
		}
	}
	u := *a.base
	// The path's values are escaped already, each as one segment: the
	// escaped form is the one sent (url.URL.String uses RawPath when it
	// encodes Path).
	u.RawPath = a.base.EscapedPath() + path
	p, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return nil, &argError{"The arguments do not make a valid path."}
	}
	u.Path = p
	if enc := q.Encode(); enc != "" {
		rawQuery = append([]string{enc}, rawQuery...)
	}
	u.RawQuery = strings.Join(rawQuery, "&")

	var body io.Reader
	if raw := obj.Get("body"); op.body && raw != nil && string(raw) != "null" {
		body = bytes.NewReader(raw)
	} else if op.bodyRequired {
		return nil, &argError{`Missing required argument "body".`}
	}
	req, err := http.NewRequestWithContext(ctx, op.method, u.String(), body)
	if err != nil {
		return nil, &argError{"The arguments do not make a valid request."}
	}
	for k, vs := range hdr {
		if !slices.Contains(notForwarded, k) {
			req.Header[k] = vs
		}
	}
	for k, vs := range extra {
		req.Header[k] = vs
	}
	if len(cookies) > 0 {
		if c := req.Header.Get("Cookie"); c != "" {
			cookies = append([]string{c}, cookies...)
		}
		req.Header.Set("Cookie", strings.Join(cookies, "; "))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, */*;q=0.5")
	return req, nil
}

// decodeValue decodes an argument's JSON: a string, number, boolean, array
// of those, or object of those. asJSON keeps the JSON text.
func decodeValue(raw json.RawMessage, asJSON bool) (any, error) {
	if asJSON {
		return string(raw), nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, errors.New("not valid JSON")
	}
	switch v := v.(type) {
	case []any:
		for _, e := range v {
			if !primitive(e) {
				return nil, errors.New("an array parameter holds only strings, numbers and booleans")
			}
		}
	case map[string]any:
		for _, e := range v {
			if !primitive(e) {
				return nil, errors.New("an object parameter holds only strings, numbers and booleans")
			}
		}
	}
	return v, nil
}

func primitive(v any) bool {
	switch v.(type) {
	case string, json.Number, bool:
		return true
	}
	return false
}

// text is a primitive value as a parameter's text.
func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		if v {
			return "true"
		}
		return "false"
	}
	return ""
}

// sortedPairs are an object's members, by name.
func sortedPairs(m map[string]any) [][2]string {
	out := make([][2]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, [2]string{k, text(m[k])})
	}
	return out
}

// simple serializes v in style simple (path and header parameters).
func simple(v any, explode bool) (string, error) { return simpleEscaped(v, explode, nil) }

// simpleEscaped is simple with each name and value passed through esc
// (nil: as they are), and the delimiters not.
func simpleEscaped(v any, explode bool, esc func(string) string) (string, error) {
	if esc == nil {
		esc = func(s string) string { return s }
	}
	switch v := v.(type) {
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = esc(text(e))
		}
		return strings.Join(parts, ","), nil
	case map[string]any:
		var parts []string
		for _, kv := range sortedPairs(v) {
			if explode {
				parts = append(parts, esc(kv[0])+"="+esc(kv[1]))
			} else {
				parts = append(parts, esc(kv[0]), esc(kv[1]))
			}
		}
		return strings.Join(parts, ","), nil
	}
	return esc(text(v)), nil
}

// formJoin serializes v in style form without explode.
func formJoin(v any) (string, error) { return simple(v, false) }

// query adds p's value v to the query: q for what url.Values encodes,
// raw for the delimited styles, whose delimiters stay unescaped.
func query(q url.Values, raw *[]string, p param, v any) error {
	switch p.style {
	case "form":
		switch v := v.(type) {
		case []any:
			if p.explode {
				for _, e := range v {
					q.Add(p.name, text(e))
				}
				return nil
			}
			s, _ := simple(v, false)
			q.Add(p.name, s)
		case map[string]any:
			if p.explode {
				for _, kv := range sortedPairs(v) {
					q.Add(kv[0], kv[1])
				}
				return nil
			}
			s, _ := simple(v, false)
			q.Add(p.name, s)
		default:
			q.Add(p.name, text(v))
		}
	case "spaceDelimited", "pipeDelimited":
		arr, ok := v.([]any)
		if !ok {
			q.Add(p.name, text(v))
			return nil
		}
		if p.explode {
			for _, e := range arr {
				q.Add(p.name, text(e))
			}
			return nil
		}
		sep := "%20"
		if p.style == "pipeDelimited" {
			sep = "|"
		}
		parts := make([]string, len(arr))
		for i, e := range arr {
			parts[i] = url.QueryEscape(text(e))
		}
		*raw = append(*raw, url.QueryEscape(p.name)+"="+strings.Join(parts, sep))
	case "deepObject":
		m, ok := v.(map[string]any)
		if !ok {
			return errors.New("a deepObject parameter is an object")
		}
		for _, kv := range sortedPairs(m) {
			q.Add(p.name+"["+kv[0]+"]", kv[1])
		}
	}
	return nil
}

// result is the tool result of the API's answer.
func result(op *operation, resp *http.Response, body []byte) json.RawMessage {
	ct := resp.Header.Get("Content-Type")
	mt, _, _ := mime.ParseMediaType(ct)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return toolError(fmt.Sprintf("HTTP %d %s: %s", resp.StatusCode, http.StatusText(resp.StatusCode), excerpt(body)))
	}
	if len(body) == 0 {
		return textResult(fmt.Sprintf("(no content; HTTP %d)", resp.StatusCode), nil)
	}
	switch {
	case isJSON && jsonx.Valid(body):
		var structured json.RawMessage
		if op.structured && bytes.HasPrefix(bytes.TrimLeft(body, " \t\r\n"), []byte("{")) {
			structured = body
		}
		return textResult(string(body), structured)
	case strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/"):
		kind := "image"
		if strings.HasPrefix(mt, "audio/") {
			kind = "audio"
		}
		b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{
			"type": kind, "mimeType": mt, "data": base64.StdEncoding.EncodeToString(body)}}})
		return b
	case mt == "" || strings.HasPrefix(mt, "text/") || isJSON || strings.HasSuffix(mt, "+xml") || mt == "application/xml":
		if utf8.Valid(body) {
			return textResult(string(body), nil)
		}
	}
	return textResult(fmt.Sprintf("(%d bytes of %s)", len(body), cmp.Or(mt, "unknown type")), nil)
}

// textResult is a tool result of one text block, with structured content
// if not nil.
func textResult(s string, structured json.RawMessage) json.RawMessage {
	b := append([]byte(nil), `{"content":[{"type":"text","text":`...)
	b = jsonx.AppendString(b, s)
	b = append(b, "}]"...)
	if structured != nil {
		b = append(b, `,"structuredContent":`...)
		b = append(b, structured...)
	}
	return append(b, '}')
}

// toolError is a tool result with isError and the message msg.
func toolError(msg string) json.RawMessage {
	b := append([]byte(nil), `{"content":[{"type":"text","text":`...)
	b = jsonx.AppendString(b, msg)
	return append(b, `}],"isError":true}`...)
}

// excerpt is at most maxExcerpt bytes of body, valid UTF-8, without
// control characters.
func excerpt(body []byte) string {
	s := strings.ToValidUTF8(truncate(string(body), maxExcerpt), "")
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return ' '
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if len(body) > maxExcerpt {
		s += " …"
	}
	return s
}
