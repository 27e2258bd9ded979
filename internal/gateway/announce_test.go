package gateway_test

//lint:file-ignore SA1019 roots and sampling are deprecated only from 2026-07-28; the gateway still relays them, and these tests use them

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// The tools server-everything registers only for a client that declared
// the capability they use.
const (
	evRoots       = "ev__get-roots-list"
	evSampling    = "ev__trigger-sampling-request"
	evElicitation = "ev__trigger-elicitation-request"
)

// TestUpstreamsAreAnnouncedTheClientsCapabilities: each upstream session
// is announced what its client declared, so server-everything (which
// registers its roots, sampling and elicitation tools only for a client
// that can answer them) offers each client through the gateway the tools it
// offers it directly, and no client is shown a tool another's capabilities
// unlocked, whichever listed first. The same holds for 2026-07-28 callers,
// whose capabilities are per request; and across replicas (Redis,
// round-robin load balancer), where each replica keeps its listings apart
// and the stateless callers' upstream sessions are shared per declared set.
func TestUpstreamsAreAnnouncedTheClientsCapabilities(t *testing.T) {
	evURL := testkit.StartEverythingHTTP(t)
	ev := func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "ev", URL: evURL})
	}
	t.Run("one replica", func(t *testing.T) { testAnnounced(t, startGateway(t, nil, ev)) })
	t.Run("two replicas", func(t *testing.T) {
		store := redisStore(t)
		lb := testkit.StartLB(t, []string{
			strings.TrimSuffix(startGateway(t, nil, ev, store), "/mcp"),
			strings.TrimSuffix(startGateway(t, nil, ev, store), "/mcp"),
		})
		testAnnounced(t, lb.URL+"/mcp")
	})
}

func testAnnounced(t *testing.T, url string) {
	ctx := context.Background()
	tools := func(cs *mcp.ClientSession) []string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
		}
		return names
	}
	check := func(who string, names []string, want, not []string) {
		t.Helper()
		if !slices.Contains(names, "ev__echo") {
			t.Fatalf("%s: ev__echo not listed: %v", who, names)
		}
		for _, w := range want {
			if !slices.Contains(names, w) {
				t.Errorf("%s: %s not listed: %v", who, w, names)
			}
		}
		for _, n := range not {
			if slices.Contains(names, n) {
				t.Errorf("%s: %s listed for a client that did not declare its capability", who, n)
			}
		}
	}

	// The most capable client lists first: its list must not become the
	// others'.
	sampler := testkit.Connect(t, url, &testkit.ConnectOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "decline"}, nil
		},
	})
	check("sampling, elicitation and roots", tools(sampler), []string{evRoots, evSampling, evElicitation}, nil)

	bare := testkit.Connect(t, url, &testkit.ConnectOptions{Capabilities: &mcp.ClientCapabilities{}})
	check("no capabilities", tools(bare), nil, []string{evRoots, evSampling, evElicitation})

	roots := testkit.Connect(t, url, nil) // the SDK's default: roots
	check("roots", tools(roots), []string{evRoots}, []string{evSampling, evElicitation})

	// A tool the client may see works: the upstream asks the client for a
	// completion through the gateway.
	res, err := sampler.CallTool(ctx, &mcp.CallToolParams{Name: evSampling, Arguments: map[string]any{"prompt": "hi", "maxTokens": 5}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); !strings.Contains(got, "sampled") {
		t.Errorf("sampling through the gateway = %q", got)
	}
	// And one it may not is unknown to it.
	res, err = bare.CallTool(ctx, &mcp.CallToolParams{Name: evSampling, Arguments: map[string]any{"prompt": "hi"}})
	if err == nil && !res.IsError {
		t.Errorf("a client without sampling called %s: %q", evSampling, text(t, res))
	}

	// 2026-07-28: the capabilities of each request.
	for _, tc := range []struct {
		caps      string
		want, not []string
	}{
		{`{"sampling":{}}`, []string{evSampling}, []string{evRoots, evElicitation}},
		{`{}`, nil, []string{evRoots, evSampling, evElicitation}},
		{`{"elicitation":{"form":{}}}`, []string{evElicitation}, []string{evRoots, evSampling}},
	} {
		req := post2026(t, url, 1, "tools/list", "")
		req = withMetaCaps(t, req, tc.caps)
		resp, body := do(t, req)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("2026-07-28 tools/list: %d %s", resp.StatusCode, body)
		}
		var names []string
		for _, n := range []string{"ev__echo", evRoots, evSampling, evElicitation} {
			if strings.Contains(body, `"`+n+`"`) {
				names = append(names, n)
			}
		}
		check("2026-07-28 "+tc.caps, names, tc.want, tc.not)
	}
}

// withMetaCaps returns req with its _meta clientCapabilities replaced.
func withMetaCaps(t *testing.T, req *http.Request, caps string) *http.Request {
	t.Helper()
	b, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Replace(string(b), `"io.modelcontextprotocol/clientCapabilities":{}`, `"io.modelcontextprotocol/clientCapabilities":`+caps, 1)
	out := post(t, req.URL.String(), "", body)
	out.Header = req.Header.Clone()
	out.ContentLength = int64(len(body))
	return out
}

// TestRootsListChangedReachesUpstreams: a client that declared
// roots.listChanged and says its roots changed has the upstream sessions
// the gateway holds for it told; the upstream asks for the roots again
// (here in a tool call) and gets the new ones.
func TestRootsListChangedReachesUpstreams(t *testing.T) {
	changed := make(chan struct{}, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "rooted", Version: "1"}, &mcp.ServerOptions{
		RootsListChangedHandler: func(context.Context, *mcp.RootsListChangedRequest) { changed <- struct{}{} },
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "roots", Description: "Lists the client's roots."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, nil, err
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, " ")}}}, nil, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(up.Close)
	url := startGateway(t, []upstreamSpec{{name: "r", url: up.URL}})

	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil) // declares roots.listChanged
	client.AddRoots(&mcp.Root{URI: "file:///one"})
	ctx := context.Background()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: testkit.DefaultProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	call := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "r__roots"})
		if err != nil {
			t.Fatal(err)
		}
		return text(t, res)
	}
	if got := call(); got != "file:///one" {
		t.Fatalf("roots = %q", got)
	}
	client.AddRoots(&mcp.Root{URI: "file:///two"}) // sends notifications/roots/list_changed
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream was not told the roots changed")
	}
	if got := call(); got != "file:///one file:///two" {
		t.Errorf("roots after the change = %q", got)
	}

	// The SDK's 2026-07-28 client gets the upstream's roots/list as an
	// input request and answers it (it failed on a request without
	// params, which roots/list may have).
	stateless := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	stateless.AddRoots(&mcp.Root{URI: "file:///three"})
	cs2, err := stateless.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs2.Close() })
	res, err := cs2.CallTool(ctx, &mcp.CallToolParams{Name: "r__roots"})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(t, res); got != "file:///three" {
		t.Errorf("2026-07-28 client's roots = %q", got)
	}
}
