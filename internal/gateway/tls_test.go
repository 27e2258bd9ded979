package gateway_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestMutualTLSUpstream runs a gateway in front of an upstream that
// requires a client certificate, and rotates that certificate: a reload
// with the files unchanged keeps the upstream's connections, a reload
// after they changed presents the new certificate.
func TestMutualTLSUpstream(t *testing.T) {
	serverCA, clientCA := testkit.NewCA(t, "server CA"), testkit.NewCA(t, "client CA")
	s := mcp.NewServer(&mcp.Implementation{Name: "secure", Version: "1"}, nil)
	// peer is the subject of the client certificate of the last request.
	var peer atomic.Value
	mcp.AddTool(s, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: peer.Load().(string)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		peer.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
		h.ServeHTTP(w, r)
	}))
	var conns atomic.Int32
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	testkit.StartMTLS(t, srv, serverCA, clientCA)

	caFile := testkit.WriteFile(t, "tls/ca.pem", string(serverCA.PEM))
	// issue writes a new client certificate named name, always to the
	// same files.
	issue := func(name string) (certFile, keyFile string) {
		leaf := clientCA.Issue(t, name)
		return testkit.WriteFile(t, "tls/client.pem", string(leaf.CertPEM)), testkit.WriteFile(t, "tls/client-key.pem", string(leaf.KeyPEM))
	}
	certFile, keyFile := issue("gateway-1")

	g, url := startGatewayG(t, []upstreamSpec{{name: "secure", url: srv.URL + "/mcp"}}, func(c *config.Config) {
		c.Upstreams[0].TLS = &config.UpstreamTLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}
	})
	cs := testkit.Connect(t, url, nil)
	whoami := func() string {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "secure__whoami"})
		if err != nil {
			t.Fatal(err)
		}
		return text(t, res)
	}
	if got := whoami(); got != "gateway-1" {
		t.Fatalf("whoami = %q, want gateway-1", got)
	}

	// The same config, as a file, as `gateway serve` reloads it.
	cfgFile := testkit.WriteFile(t, "gateway.yaml", fmt.Sprintf(`server:
  public_url: %s
auth:
  anonymous: true
upstreams:
  - name: secure
    url: %s/mcp
    watch: false
    tls:
      ca_file: %s
      cert_file: %s
      key_file: %s
`, url, srv.URL, caFile, certFile, keyFile))
	// The client declared roots: its GET stream has the gateway open the
	// upstream's, on a connection of its own, once.
	waitUpstreamStreams(t, g, 1)
	before := conns.Load()
	if err := g.ReloadFile(cfgFile, nil); err != nil {
		t.Fatal(err)
	}
	if got := whoami(); got != "gateway-1" || conns.Load() != before {
		t.Errorf("after a reload with the same files: whoami = %q, %d new connections; want gateway-1 on the same connection", got, conns.Load()-before)
	}

	issue("gateway-2")
	if err := g.ReloadFile(cfgFile, nil); err != nil {
		t.Fatal(err)
	}
	if got := whoami(); got != "gateway-2" {
		t.Errorf("after the certificate was rotated: whoami = %q, want gateway-2", got)
	}

	// A key that does not match its certificate is refused; the running
	// client goes on with the certificate it has.
	other := clientCA.Issue(t, "other")
	if err := os.WriteFile(keyFile, other.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := g.ReloadFile(cfgFile, nil); err == nil {
		t.Error("a key that does not match its certificate was accepted")
	}
	if got := whoami(); got != "gateway-2" {
		t.Errorf("after a refused reload: whoami = %q, want gateway-2", got)
	}
}
