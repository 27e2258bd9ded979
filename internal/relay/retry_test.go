package relay

import (
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// TestRetryParams: params given raw or as an object are a retry's when,
// and only when, they have requestState or inputResponses at the top;
// the object returned for an object given is a copy, which may be edited
// without changing the call's own params.
func TestRetryParams(t *testing.T) {
	for _, tc := range []struct {
		in    string
		retry bool
	}{
		{`{"name":"t","arguments":{}}`, false},
		{`{"name":"t","arguments":{"requestState":"x","inputResponses":{}}}`, false},
		{`{"name":"t","requestState":"s"}`, true},
		{`{"name":"t","inputResponses":{"a":{}}}`, true},
	} {
		o, err := jsonx.ParseObject([]byte(tc.in))
		if err != nil {
			t.Fatal(err)
		}
		for _, params := range []jsonrpc.Params{jsonrpc.RawParams([]byte(tc.in)), jsonrpc.ObjectParams(o)} {
			p := retryParams(params)
			if (p != nil) != tc.retry {
				t.Fatalf("%s: retry %v, want %v", tc.in, p != nil, tc.retry)
			}
			if p == nil {
				continue
			}
			if string(p.Bytes()) != string(o.Bytes()) {
				t.Errorf("%s: parsed as %s", tc.in, p.Bytes())
			}
			p.Delete("inputResponses")
			p.Delete("requestState")
			if string(params.Bytes()) != string(o.Bytes()) {
				t.Errorf("%s: the params given changed to %s", tc.in, params.Bytes())
			}
		}
	}
}
