package capset

import (
	"encoding/json"
	"maps"
	"testing"
)

func TestUnion(t *testing.T) {
	const (
		list = `{"listChanged":true}`
		sub  = `{"listChanged":true,"subscribe":true}`
	)
	for _, tc := range []struct {
		name      string
		offers    []Offer
		stateless bool
		want      map[string]string
	}{
		{"no upstream", nil, false, map[string]string{}},
		{"tools only", []Offer{{Caps: json.RawMessage(`{"tools":{}}`)}}, false,
			map[string]string{"tools": list}},
		{"null is not offered", []Offer{{Caps: json.RawMessage(`{"tools":{},"prompts":null}`)}}, false,
			map[string]string{"tools": list}},
		{"listChanged whatever the upstream says", []Offer{{Caps: json.RawMessage(`{"prompts":{"listChanged":false}}`)}}, false,
			map[string]string{"prompts": list}},
		{"logging and completions empty", []Offer{{Caps: json.RawMessage(`{"logging":{"x":1},"completions":{},"experimental":{}}`)}}, false,
			map[string]string{"logging": `{}`, "completions": `{}`}},
		{"union of several", []Offer{
			{Caps: json.RawMessage(`{"tools":{}}`)},
			{Caps: json.RawMessage(`{"resources":{}}`)},
			{Caps: json.RawMessage(`{}`)},
		}, false, map[string]string{"tools": list, "resources": list}},
		{"resources and subscribe", []Offer{
			{Caps: json.RawMessage(`{"resources":{}}`)},
			{Caps: json.RawMessage(`{"resources":{"subscribe":true}}`), Subscribe: true},
		}, false, map[string]string{"resources": sub}},
		{"stateless drops subscribe", []Offer{
			{Caps: json.RawMessage(`{"resources":{"subscribe":true}}`), Subscribe: true},
		}, true, map[string]string{"resources": list}},
		{"unknown offers everything", []Offer{{Caps: nil}}, false,
			map[string]string{"tools": list, "prompts": list, "resources": list, "logging": `{}`, "completions": `{}`}},
		{"unknown and known", []Offer{{Caps: json.RawMessage(`{"tools":{}}`)}, {}}, true,
			map[string]string{"tools": list, "prompts": list, "resources": list, "logging": `{}`, "completions": `{}`}},
		{"malformed offers nothing", []Offer{{Caps: json.RawMessage(`[1]`)}}, false, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Cache
			got := map[string]string{}
			for k, v := range c.Union(tc.offers, tc.stateless) {
				got[k] = string(v)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("Union = %v, want %v", got, tc.want)
			}
		})
	}
}
