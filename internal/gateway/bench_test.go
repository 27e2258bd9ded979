package gateway_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpgw/gateway/internal/testkit"
)

// BenchmarkToolsCall measures one tools/call through an in-process gateway
// to a raw JSON upstream (which echoes the params into its result), for a
// small and a 10 KB argument: the gateway's own cost per call.
func BenchmarkToolsCall(b *testing.B) {
	raw := testkit.NewRawUpstream(b)
	for _, size := range []int{100, 10000} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			url := startGateway(b, []upstreamSpec{{name: "raw", url: raw.URL}})
			sid := initialize(b, url)
			body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"raw__raw","arguments":{"q":"` + strings.Repeat("x", size) + `"}}}`)
			client := &http.Client{}
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				req.Header.Set("Mcp-Session-Id", sid)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				out, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || !bytes.Contains(out, []byte(`"id":7`)) {
					b.Fatalf("%d %s", resp.StatusCode, out)
				}
			}
		})
	}
}
