package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// eraServer answers server/discover with discover (status, body) and
// everything else with a minimal 2025-11-25 server; it records methods.
type eraServer struct {
	mu       sync.Mutex
	discover func() (int, string)
	methods  []string
	headers  []http.Header
}

func (s *eraServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	_ = json.Unmarshal(body, &m)
	s.mu.Lock()
	s.methods = append(s.methods, m.Method)
	s.headers = append(s.headers, r.Header.Clone())
	discover := s.discover
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch m.Method {
	case "server/discover":
		status, out := discover()
		w.WriteHeader(status)
		io.WriteString(w, out)
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "legacy-1")
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"l","version":"1"}}}`)
	case "notifications/initialized":
		w.WriteHeader(http.StatusAccepted)
	default:
		io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":[]}}`)
	}
}

func (s *eraServer) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.methods...)
}

const discoverResult = `{"jsonrpc":"2.0","id":0,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"m","version":"1"}}}}`

func TestOpenLearnsTheEra(t *testing.T) {
	for _, tc := range []struct {
		name     string
		discover func() (int, string)
		modern   bool
		wantErr  bool
	}{
		{"modern", func() (int, string) { return 200, discoverResult }, true, false},
		{"legacy 400 text", func() (int, string) { return 400, "Bad Request: no session" }, false, false},
		{"legacy 404", func() (int, string) { return 404, "" }, false, false},
		{"legacy method not found", func() (int, string) {
			return 200, `{"jsonrpc":"2.0","id":0,"error":{"code":-32601,"message":"Method not found"}}`
		}, false, false},
		{"dual era without our modern version", func() (int, string) {
			return 400, `{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2027-01-01","2025-11-25"]}}}`
		}, false, false},
		{"modern without a version we speak", func() (int, string) {
			return 400, `{"jsonrpc":"2.0","id":0,"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2027-01-01"]}}}`
		}, false, true},
		{"down", func() (int, string) { return 503, "" }, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &eraServer{discover: tc.discover}
			srv := httptest.NewServer(s)
			defer srv.Close()
			c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{})
			for range 2 {
				res, err := c.Open(context.Background())
				if tc.wantErr {
					if err == nil {
						t.Fatalf("Open succeeded: %+v", res.Session)
					}
					continue
				}
				if err != nil {
					t.Fatal(err)
				}
				if got := res.Session.ProtocolVersion == modernVersion.String(); got != tc.modern {
					t.Fatalf("modern = %v, want %v (session %+v)", got, tc.modern, res.Session)
				}
			}
			seen := s.seen()
			discovers := strings.Count(strings.Join(seen, ","), "server/discover")
			switch {
			case tc.wantErr:
				if discovers != 2 {
					t.Errorf("a failed probe is not remembered: %v", seen)
				}
			case tc.modern:
				// server/discover is what opens a modern "session": it
				// brings the capabilities.
				if discovers != 2 || strings.Contains(strings.Join(seen, ","), "initialize") {
					t.Errorf("modern: %v", seen)
				}
			case discovers != 1:
				t.Errorf("a legacy era is remembered: %v", seen)
			}
		})
	}
}

// A modern session's requests carry the mirrored headers and the
// per-request _meta; a modern upstream that turns legacy is noticed.
func TestModernCalls(t *testing.T) {
	s := &eraServer{discover: func() (int, string) { return 200, discoverResult }}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := newTestClient(t, srv.URL, 5*time.Second, nil, Options{ClientInfo: json.RawMessage(`{"name":"gw","version":"1"}`)})
	res, err := c.Open(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	us := res.Session
	extra := http.Header{"Mcp-Param-Region": {"eu"}, "X-Other": {"dropped"}}
	r, err := c.CallWith(context.Background(), us, jsonrpc.StringID("c.1"), "tools/call", json.RawMessage(`{"name":"na me","arguments":{}}`), extra)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	s.mu.Lock()
	h := s.headers[len(s.headers)-1]
	s.mu.Unlock()
	if h.Get("Mcp-Protocol-Version") != modernVersion.String() || h.Get("Mcp-Method") != "tools/call" || h.Get("Mcp-Name") != "na me" ||
		h.Get("Mcp-Param-Region") != "eu" || h.Get("X-Other") != "" || h.Get("Mcp-Session-Id") != "" {
		t.Errorf("headers %v", h)
	}

	// The upstream is replaced by a legacy one: the call says the session
	// expired, and the next Open probes again.
	s.mu.Lock()
	s.discover = func() (int, string) { return 400, "Bad Request" }
	s.mu.Unlock()
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" && r.Header.Get("Mcp-Method") == "tools/list" {
			http.Error(w, "Bad Request: missing session", http.StatusBadRequest)
			return
		}
		s.ServeHTTP(w, r)
	})
	if _, err := c.Call(context.Background(), us, jsonrpc.IntID(2), "tools/list", nil); !errors.Is(err, ErrSessionExpired) {
		t.Fatalf("call to an upstream no longer modern: %v", err)
	}
	res, err = c.Open(context.Background())
	if err != nil || res.Session.ProtocolVersion == modernVersion.String() || res.Session.SessionID != "legacy-1" {
		t.Fatalf("reopened: %+v %v", res, err)
	}
}

// TestOpenGoSDKServers probes the Go SDK's servers: stateless mode speaks
// 2026-07-28, the default (sessions) does not.
func TestOpenGoSDKServers(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		u := newTestUpstream(t, mcp.StreamableHTTPOptions{Stateless: stateless})
		c := newTestClient(t, u.srv.URL, 5*time.Second, nil, Options{})
		res, err := c.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Session.ProtocolVersion == modernVersion.String(); got != stateless {
			t.Errorf("stateless %v: session %+v", stateless, res.Session)
		}
		r, err := c.Call(context.Background(), res.Session, jsonrpc.IntID(1), "tools/list", nil)
		if err != nil {
			t.Fatalf("stateless %v: tools/list: %v", stateless, err)
		}
		msg, _, err := r.Next()
		r.Close()
		if err != nil || msg.Kind != jsonrpc.KindResponse {
			t.Errorf("stateless %v: tools/list: %v %+v", stateless, err, msg)
		}
	}
}
