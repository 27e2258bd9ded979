package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/testkit"
)

// mtlsUpstream is the test upstream served over TLS by a certificate of
// its own CA, requiring a client certificate of the clients CA. It
// returns the server's URL and the directory holding, as PEM files, the
// server's CA (ca.pem), another CA (wrong-ca.pem) and a client
// certificate of the clients CA (client.pem, client-key.pem).
func mtlsUpstream(t *testing.T) (url, dir string) {
	t.Helper()
	u := newTestUpstream(t, mcp.StreamableHTTPOptions{})
	serverCA, clientCA := testkit.NewCA(t, "server CA"), testkit.NewCA(t, "client CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(u.serveHTTP))
	testkit.StartMTLS(t, srv, serverCA, clientCA)
	client := clientCA.Issue(t, "gateway")
	dir = t.TempDir()
	for name, b := range map[string][]byte{
		"ca.pem": serverCA.PEM, "wrong-ca.pem": testkit.NewCA(t, "wrong CA").PEM,
		"client.pem": client.CertPEM, "client-key.pem": client.KeyPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return srv.URL + "/mcp", dir
}

func tlsClient(t *testing.T, url string, tc *config.UpstreamTLS) *Client {
	t.Helper()
	c := New(config.Upstream{Name: "up1", URL: url, Timeout: config.Duration(5 * time.Second), TLS: tc}, Options{})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMutualTLS(t *testing.T) {
	url, dir := mtlsUpstream(t)
	file := func(name string) string { return filepath.Join(dir, name) }

	t.Run("ca and client certificate", func(t *testing.T) {
		c := tlsClient(t, url, &config.UpstreamTLS{CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")})
		s := initialize(t, c)
		r, err := callTool(context.Background(), c, s, jsonrpc.IntID(1), "echo", toolArgs{Text: "over mTLS"})
		if err != nil {
			t.Fatal(err)
		}
		msgs, err := readAll(t, r)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("got %d messages, %v", len(msgs), err)
		}
		if got := resultText(t, msgs[len(msgs)-1].msg); got != "over mTLS" {
			t.Errorf("echo = %q", got)
		}
	})

	// failure checks that Initialize fails with an *Error for up1 whose
	// message says why (want) without naming the upstream's address.
	failure := func(t *testing.T, tc *config.UpstreamTLS, want string) {
		t.Helper()
		c := tlsClient(t, url, tc)
		_, err := c.Initialize(context.Background())
		var e *Error
		if !errors.As(err, &e) || e.Upstream != "up1" {
			t.Fatalf("got %v, want an *Error for up1", err)
		}
		msg := err.Error()
		t.Log(msg)
		if !strings.HasPrefix(msg, "upstream up1: initialize: ") || !strings.Contains(msg, want) {
			t.Errorf("message %q, want it to name up1 and say %q", msg, want)
		}
		host := strings.TrimPrefix(strings.TrimSuffix(url, "/mcp"), "https://")
		for _, leak := range []string{url, host, "127.0.0.1"} {
			if strings.Contains(msg, leak) {
				t.Errorf("message %q contains %q", msg, leak)
			}
		}
	}
	t.Run("no client certificate", func(t *testing.T) {
		failure(t, &config.UpstreamTLS{CAFile: file("ca.pem")}, "certificate required")
	})
	t.Run("wrong CA", func(t *testing.T) {
		failure(t, &config.UpstreamTLS{CAFile: file("wrong-ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")},
			"certificate signed by unknown authority")
	})
	t.Run("system roots", func(t *testing.T) {
		failure(t, &config.UpstreamTLS{CertFile: file("client.pem"), KeyFile: file("client-key.pem")}, "failed to verify certificate")
	})
	t.Run("server name", func(t *testing.T) {
		// The certificate is for 127.0.0.1 and localhost; the name is
		// redacted from the message like the URL's host.
		failure(t, &config.UpstreamTLS{ServerName: "mcp.internal", CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")},
			"not <upstream>")
		c := tlsClient(t, url, &config.UpstreamTLS{ServerName: "localhost", CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")})
		initialize(t, c)
	})
	t.Run("files gone", func(t *testing.T) {
		// Validation found them; they went before the client was built.
		c := tlsClient(t, url, &config.UpstreamTLS{CAFile: file("gone.pem")})
		_, err := c.Initialize(context.Background())
		if err == nil || !strings.Contains(err.Error(), "invalid upstream TLS settings") || strings.Contains(err.Error(), "gone.pem") {
			t.Errorf("got %v, want invalid upstream TLS settings without the file's name", err)
		}
	})
}
