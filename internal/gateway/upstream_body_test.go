package gateway_test

import (
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestToolCallUpstreamBodyExact: the whole body of the tools/call the
// upstream gets is the JSON-RPC head, the client's params with only the
// name changed (its members in their order, each value byte for byte as
// the client spelt it, spaces and escapes included; the space between
// members is not kept), and the closing brace: the params are encoded
// straight into the body (see jsonrpc.Params), as they were encoded on
// their own before.
func TestToolCallUpstreamBodyExact(t *testing.T) {
	raw := testkit.NewRawUpstream(t)
	url := startGateway(t, []upstreamSpec{{name: "raw", url: raw.URL}})
	sid := initialize(t, url)
	big := strings.Repeat("x", 10000)
	for _, tc := range []struct{ params, forwarded string }{
		{`{"name":"raw__raw","arguments":{"q":"` + big + `"}}`, `{"name":"raw","arguments":{"q":"` + big + `"}}`},
		{`{ "arguments" : { "q" : "\u00e9\"<>" , "n" : [1, 2.50e3] } , "name" : "raw__raw" , "x-extra" : null , "_meta" : { "progressToken" : 7 } }`,
			`{"arguments":{ "q" : "\u00e9\"<>" , "n" : [1, 2.50e3] },"name":"raw","x-extra":null,"_meta":{ "progressToken" : 7 }}`},
	} {
		postJSON(t, url, sid, `{"jsonrpc":"2.0","id":"c-1","method":"tools/call","params":`+tc.params+`}`)
		got := raw.LastBody("tools/call")
		msg, err := jsonrpc.Decode(got)
		if err != nil {
			t.Fatalf("upstream got %.200s: %v", got, err)
		}
		want := `{"jsonrpc":"2.0","id":` + msg.ID.String() + `,"method":"tools/call","params":` + tc.forwarded + `}`
		if string(got) != want {
			t.Errorf("upstream got\n%.300s\nwant\n%.300s", got, want)
		}
	}
}
