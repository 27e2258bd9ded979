package toolsearch

import (
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
)

func TestParseCall(t *testing.T) {
	ts := &config.ToolSearch{MaxResults: 5}
	params := func(s string) *jsonx.Object {
		o, err := jsonx.ParseValidObject([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	for _, tc := range []struct {
		name, tool, params string
		want               Call
		failure            string
	}{
		{name: "search", tool: SearchTool, params: `{"arguments":{"query":"open an issue","limit":2}}`, want: Call{Search: true, Query: "open an issue", Limit: 2}},
		{name: "limit over the bound", tool: SearchTool, params: `{"arguments":{"query":"q","limit":50}}`, want: Call{Search: true, Query: "q", Limit: 5}},
		{name: "no query", tool: SearchTool, params: `{"arguments":{}}`, failure: "query must be a string"},
		{name: "arguments not an object", tool: SearchTool, params: `{"arguments":[1]}`, failure: "arguments must be an object"},
		{name: "call", tool: CallTool, params: `{"arguments":{"name":"gh__open","arguments":{"t":1}},"_meta":{"progressToken":3}}`,
			want: Call{Params: []byte(`{"name":"gh__open","arguments":{"t":1},"_meta":{"progressToken":3}}`)}},
		{name: "call of an own tool", tool: CallTool, params: `{"arguments":{"name":"` + SearchTool + `"}}`, failure: "name must name one of your tools"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, failure := ParseCall(ts, tc.tool, params(tc.params))
			if tc.failure != "" {
				if !strings.Contains(failure, tc.failure) || !strings.HasPrefix(failure, "Invalid arguments for tool \""+tc.tool+"\": ") {
					t.Errorf("failure %q, want %q", failure, tc.failure)
				}
				return
			}
			if failure != "" || got.Search != tc.want.Search || got.Query != tc.want.Query || got.Limit != tc.want.Limit || string(got.Params) != string(tc.want.Params) {
				t.Errorf("ParseCall = %+v (%s), %q; want %+v (%s)", got, got.Params, failure, tc.want, tc.want.Params)
			}
		})
	}
}
