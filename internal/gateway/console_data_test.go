package gateway_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/console"
	"github.com/mcpgw/gateway/internal/testkit"
)

// TestConsoleUpstreamAndTenantData: the upstreams page shows, per
// upstream, the lists this replica caches (items, age) and a stdio
// upstream's processes (running, started, exited, restarted); the
// overview shows each tenant's sessions and open GET streams.
func TestConsoleUpstreamAndTenantData(t *testing.T) {
	bin := testkit.StdioServer(t)
	alpha := testkit.NewUpstream(t, "alpha")
	g, url := startGatewayG(t, []upstreamSpec{spec(alpha)}, func(c *config.Config) {
		c.Upstreams = append(c.Upstreams, config.Upstream{Name: "fs", Command: []string{bin},
			Stdio: &config.UpstreamStdio{StopGrace: config.Duration(time.Second)}})
		c.Tenants = []config.Tenant{{ID: "default"}, {ID: "idle"}}
	})
	admin := httptest.NewServer(g.AdminHandler())
	t.Cleanup(admin.Close)
	page := func(path string) string {
		t.Helper()
		resp, err := http.Get(admin.URL + console.Path + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		// The text of the page, one space between elements.
		text := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(string(b), " ")
		return strings.Join(strings.Fields(html.UnescapeString(text)), " ")
	}
	// row returns the text of the table row that starts with cell first.
	row := func(text, first string) string {
		i := strings.Index(text, " "+first+" ")
		if i < 0 {
			return ""
		}
		return text[i:]
	}

	if up := row(page("/upstreams"), "fs"); !strings.Contains(up, "none cached 0 running; 0 started, 0 exited, 0 restarted") {
		t.Errorf("fs before any session: %q", up)
	}

	cs := testkit.Connect(t, url, nil)
	ctx := context.Background()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	fsTools := 0
	for _, tl := range res.Tools {
		if strings.HasPrefix(tl.Name, "fs__") {
			fsTools++
		}
	}
	// A crash, and the process started again by the next call.
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__crash"}); err == nil && !r.IsError {
		t.Fatal("crash call succeeded")
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "fs__pid"}); err != nil {
		t.Fatal(err)
	}

	text := page("/upstreams")
	fs := row(text, "fs")
	for _, want := range []string{
		"tools: " + strconv.Itoa(fsTools) + ", ", " ago",
		"1 running; 2 started, 1 exited, 1 restarted",
	} {
		if !strings.Contains(fs, want) {
			t.Errorf("fs lacks %q: %q", want, fs)
		}
	}
	if a := row(text, "alpha"); !strings.Contains(a, "tools: ") || !strings.Contains(a, "not stdio") {
		t.Errorf("alpha: %q", a)
	}

	// The client's GET stream (the SDK opens one after initialize).
	var over string
	if !testkit.Poll(10*time.Second, func() bool {
		over = page("/")
		return strings.HasPrefix(row(over, "default"), " default 1 1 ")
	}) {
		t.Fatalf("overview: default should hold 1 session and 1 GET stream: %q", row(over, "default"))
	}
	if idle := row(over, "idle"); !strings.HasPrefix(idle, " idle 0 0 ") {
		t.Errorf("overview: idle: %q", idle)
	}
}
