package gateway_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// counted is a server that counts the requests that reach it: one the
// gateway must never reach (an admin endpoint, a cloud metadata service).
type counted struct {
	*httptest.Server
	hits atomic.Int64
}

func startCounted(t *testing.T, tls bool) *counted {
	c := &counted{}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		c.hits.Add(1)
		_, _ = w.Write([]byte(`{"issuer":"x"}`))
	})
	if tls {
		c.Server = httptest.NewTLSServer(h)
	} else {
		c.Server = httptest.NewServer(h)
	}
	t.Cleanup(c.Close)
	return c
}

// prmUpstream is a user_oauth upstream, on ln, that answers every MCP
// request with 401 and a resource_metadata URL on its own origin, where
// prm answers.
func prmUpstream(t *testing.T, ln net.Listener, prm http.HandlerFunc) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/prm", prm)
	return srv.URL
}

func serveJSON(v any) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
}

// hostIP returns an address of this host that is not loopback, "" if it
// has none.
func hostIP() string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	return ""
}

// consentTo opens a consent link of alice's for the upstream at upURL
// (user_oauth, no issuer) and confirms it, stopping at any redirect away
// from the gateway; it returns the page and the gateway's log.
func consentTo(t *testing.T, upURL string, edit func(*config.Config)) (*testkit.Page, *oauthEnv) {
	t.Helper()
	e := startOAuthEnv(t, 0, func(c *config.Config) {
		c.Upstreams[0].URL = upURL + "/mcp"
		c.Upstreams[0].Auth.Issuer = ""
		if edit != nil {
			edit(c)
		}
	})
	alice, _ := e.connect(t, "alice", false)
	b := testkit.NewBrowser(t)
	b.Client.CheckRedirect = func(req *http.Request, _ []*http.Request) error {
		if !strings.HasPrefix(req.URL.String(), e.origin) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	page := b.Get(t, linkFromResult(t, alice))
	if page.Status != http.StatusOK {
		t.Fatalf("consent page: %d %s", page.Status, page.Body)
	}
	return b.Submit(t, page, "/oauth/consent", nil), e
}

// TestUserOAuthDiscoverySSRF: an upstream found by discovery (user_oauth,
// no issuer) cannot make the gateway reach a host of its choosing: a
// metadata URL that redirects elsewhere, an authorization server with a
// query, one on plain http, one the metadata of another resource names,
// one not listed in vault.discovered_issuers, and one on loopback while
// the upstream is not: none of them gets a single request; the user is
// told why, with nothing of the target or of a secret.
func TestUserOAuthDiscoverySSRF(t *testing.T) {
	loopback := func(t *testing.T) net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	for _, tc := range []struct {
		name string
		// prm is the upstream's metadata, for the target at target and
		// the upstream at up.
		prm    func(target, up string) http.HandlerFunc
		tls    bool
		listen func(t *testing.T) net.Listener
		edit   func(*config.Config)
		want   string
	}{
		{
			name: "metadata redirects to another origin",
			prm: func(target, _ string) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					http.Redirect(w, r, target+"/.well-known/oauth-protected-resource", http.StatusFound)
				}
			},
			want: "redirect",
		},
		{
			name: "issuer with a query",
			prm: func(target, up string) http.HandlerFunc {
				return serveJSON(map[string]any{"resource": up + "/mcp", "authorization_servers": []string{target + "/admin?cmd=shutdown"}})
			},
			tls:  true,
			want: "query or fragment",
		},
		{
			name: "loopback admin path on plain http",
			prm: func(target, up string) http.HandlerFunc {
				return serveJSON(map[string]any{"resource": up + "/mcp", "authorization_servers": []string{target + "/admin"}})
			},
			want: "not https",
		},
		{
			name: "metadata of another resource",
			prm: func(target, _ string) http.HandlerFunc {
				return serveJSON(map[string]any{"resource": "https://other.example/mcp", "authorization_servers": []string{target}})
			},
			tls:  true,
			want: "names another resource",
		},
		{
			name: "issuer not listed",
			prm: func(target, up string) http.HandlerFunc {
				return serveJSON(map[string]any{"resource": up + "/mcp", "authorization_servers": []string{target + "/admin"}})
			},
			tls:  true,
			edit: func(c *config.Config) { c.Vault.DiscoveredIssuers = []string{"https://as.example"} },
			want: "not one of vault.discovered_issuers",
		},
		{
			// The upstream on a public address names a server on
			// loopback, by address and by a name that resolves there:
			// refused as the connection is made.
			name: "loopback while the upstream is not",
			prm: func(target, up string) http.HandlerFunc {
				local := strings.Replace(target, "127.0.0.1", "localhost", 1)
				return serveJSON(map[string]any{"resource": up + "/mcp", "authorization_servers": []string{target + "/admin", local + "/admin"}})
			},
			tls: true,
			listen: func(t *testing.T) net.Listener {
				ip := hostIP()
				if ip == "" {
					t.Skip("this host has no address but loopback")
				}
				ln, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
				if err != nil {
					t.Skip(err)
				}
				return ln
			},
			want: "loopback, link-local or private address",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := startCounted(t, tc.tls)
			listen := tc.listen
			if listen == nil {
				listen = loopback
			}
			ln := listen(t)
			up := "http://" + ln.Addr().String()
			prmUpstream(t, ln, tc.prm(target.URL, up))
			page, e := consentTo(t, up, tc.edit)
			if n := target.hits.Load(); n != 0 {
				t.Fatalf("the target got %d requests", n)
			}
			if page.Status != http.StatusBadGateway || !strings.Contains(page.Body, "Authorization server refused") || !strings.Contains(page.Body, tc.want) {
				t.Fatalf("page %d, want 502 saying %q:\n%s", page.Status, tc.want, page.Body)
			}
			host := strings.TrimPrefix(strings.TrimPrefix(target.URL, "https://"), "http://")
			for _, leak := range []string{host, gwSecret, "/admin", "cmd=shutdown"} {
				if strings.Contains(page.Body, leak) {
					t.Errorf("the page shows %q:\n%s", leak, page.Body)
				}
			}
			if strings.Contains(e.logs.String(), gwSecret) {
				t.Errorf("the log shows the client secret:\n%s", e.logs.String())
			}
		})
	}
}

// TestUserOAuthDiscoveryOwnOrigin: discovery still finds an authorization
// server the upstream's metadata names on the upstream's own origin (plain
// http there is accepted), and sends the browser to it.
func TestUserOAuthDiscoveryOwnOrigin(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	up := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+up+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", serveJSON(map[string]any{"resource": up + "/mcp", "authorization_servers": []string{up + "/as"}}))
	mux.HandleFunc("/.well-known/oauth-authorization-server/as", serveJSON(map[string]any{
		"issuer": up + "/as", "authorization_endpoint": up + "/as/authorize", "token_endpoint": up + "/as/token",
		"code_challenge_methods_supported": []string{"S256"},
	}))
	page, _ := consentTo(t, up, nil)
	if page.Status != http.StatusSeeOther || !strings.HasPrefix(page.Header.Get("Location"), up+"/as/authorize?") {
		t.Fatalf("want a redirect to %s/as/authorize, got %d %s %s", up, page.Status, page.Header.Get("Location"), page.Body)
	}
}
