package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/testkit"
)

// shareClient is one principal's raw client of the gateway.
type shareClient struct {
	t      *testing.T
	hc, st *testkit.HostileClient // st: a 2026-07-28 tools/call's headers
}

func newShareClient(t *testing.T, lab *labIssuer, url, sub, tenant string) *shareClient {
	hc, st := testkit.NewHostileClient(t, url), testkit.NewHostileClient(t, url)
	hc.Token = labToken(t, lab, url, sub, tenant)
	st.Token = hc.Token
	st.Header = http.Header{"Mcp-Protocol-Version": {"2026-07-28"}, "Mcp-Method": {"tools/call"}, "Mcp-Name": {"alpha__echo"}}
	return &shareClient{t: t, hc: hc, st: st}
}

// open initializes a 2025-11-25 session and returns its id, or "" and the
// refusal.
func (c *shareClient) open() (string, *testkit.HostileResponse) {
	c.t.Helper()
	r, err := c.hc.Post(c.t.Context(), "", testkit.InitializeBody("2025-11-25", nil, nil))
	if err != nil {
		c.t.Fatal(err)
	}
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || sid == "" {
		return "", r
	}
	if r, err := c.hc.Post(c.t.Context(), sid, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)); err != nil || r.Status != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: %v %v", err, r)
	}
	return sid, nil
}

// mustOpen opens a session, failing the test if it is refused.
func (c *shareClient) mustOpen() string {
	c.t.Helper()
	sid, r := c.open()
	if sid == "" {
		c.t.Fatalf("initialize: %v", r)
	}
	return sid
}

// call calls alpha__echo in session sid and returns the answer.
func (c *shareClient) call(sid, text string) *testkit.HostileResponse {
	c.t.Helper()
	r, err := c.hc.Post(c.t.Context(), sid, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha__echo","arguments":{"text":%q}}}`, text))
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// mustCall calls alpha__echo in session sid and checks the result.
func (c *shareClient) mustCall(sid, text string) {
	c.t.Helper()
	if r := c.call(sid, text); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "alpha:"+text) {
		c.t.Fatalf("tools/call in session %s: %v", sid, r)
	}
}

// callStateless calls alpha__echo as a 2026-07-28 client (no session).
func (c *shareClient) callStateless(text string) *testkit.HostileResponse {
	c.t.Helper()
	r, err := c.st.Post(c.t.Context(), "", fmt.Appendf(nil, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"t","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}},"name":"alpha__echo","arguments":{"text":%q}}}`, text))
	if err != nil {
		c.t.Fatal(err)
	}
	return r
}

// TestSessionShareOfSmallPool (issue 26): with max_sessions 40 and the
// shares left to their defaults, one principal's 45 initializes get 4
// sessions (a tenth of the pool) and 429 naming sessions_per_principal
// for the rest, never 503; a principal of another tenant then opens a
// session and calls a tool, and a 2026-07-28 caller is served too. In the
// memory store, and in Redis (which has no max_sessions, but the same
// derived caps).
func TestSessionShareOfSmallPool(t *testing.T) {
	for _, store := range []string{config.StoreMemory, config.StoreRedis} {
		t.Run(store, func(t *testing.T) {
			a := testkit.NewUpstream(t, "alpha")
			lab := newLabIssuer(t)
			edits := []func(*config.Config){labAuth(lab), func(c *config.Config) { c.Sessions.MaxSessions = 40 }}
			if store == config.StoreRedis {
				edits = append(edits, redisStore(t))
			}
			g, url := startGatewayG(t, []upstreamSpec{spec(a)}, edits...)
			mallory := newShareClient(t, lab, url, "mallory", "acme")
			opened := 0
			for i, r := range mallory.hc.Initializes(t.Context(), 45, 4) {
				if r.Status == http.StatusOK {
					opened++
					continue
				}
				wantRPCError(t, fmt.Sprint("initialize ", i), r, http.StatusTooManyRequests, -32600, "sessions_per_principal (4)")
			}
			if opened != 4 {
				t.Fatalf("one principal opened %d sessions of a pool of 40, want its share, 4", opened)
			}
			if n := limitCount(t, g, "sessions_per_principal"); n != 41 {
				t.Errorf("sessions_per_principal rejections = %d, want 41", n)
			}
			if n := limitCount(t, g, "max_sessions"); n != 0 {
				t.Errorf("max_sessions rejections = %d, want none", n)
			}
			bob := newShareClient(t, lab, url, "bob", "globex")
			bob.mustCall(bob.mustOpen(), "hello")
			if r := bob.callStateless("stateless"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "alpha:stateless") {
				t.Fatalf("a 2026-07-28 call: %v", r)
			}
		})
	}
}

// TestSessionPoolFullEvictsHeaviest: when the memory store is full, a new
// session evicts the least recently used session of the heaviest holder
// (the principal holding the most, in the tenant holding the most), whose
// client then gets 404 and whose upstream session is ended; the newcomer
// is served. A 2026-07-28 caller in a full store is served the same way.
func TestSessionPoolFullEvictsHeaviest(t *testing.T) {
	a := testkit.NewUpstream(t, "alpha")
	lab := newLabIssuer(t)
	g, url := startGatewayG(t, []upstreamSpec{spec(a)}, labAuth(lab), func(c *config.Config) {
		c.Sessions.MaxSessions = 10
		c.Sessions.MaxPerPrincipal = 6
		c.Sessions.MaxPerTenant = 10
	})
	mallory := newShareClient(t, lab, url, "mallory", "acme")
	bob := newShareClient(t, lab, url, "bob", "globex")
	var ms, bs []string
	for range 6 {
		ms = append(ms, mallory.mustOpen())
	}
	for range 4 {
		bs = append(bs, bob.mustOpen())
	}
	// Full: acme 6, globex 4. mallory's first session is used again, so
	// her second is her least recently used.
	mallory.mustCall(ms[0], "still here")
	for _, sid := range bs {
		bob.mustCall(sid, "mine")
	}
	deletes := func() int {
		n := 0
		for _, r := range a.Requests() {
			if r.Method == http.MethodDelete {
				n++
			}
		}
		return n
	}
	before := deletes()

	carol := newShareClient(t, lab, url, "carol", "globex")
	cs := carol.mustOpen()
	carol.mustCall(cs, "newcomer")
	if r := mallory.call(ms[1], "evicted?"); r.Status != http.StatusNotFound {
		t.Fatalf("the evicted session: %v, want 404", r)
	}
	for _, sid := range slices.Concat(ms[2:], ms[:1]) {
		mallory.mustCall(sid, "kept")
	}
	for _, sid := range bs {
		bob.mustCall(sid, "kept")
	}
	// The evicted session's upstream session is ended, by the expiry
	// workers: poll with a deadline.
	for deadline := time.Now().Add(10 * time.Second); deletes() == before; {
		if time.Now().After(deadline) {
			t.Fatal("the evicted session's upstream session was not ended")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A 2026-07-28 caller's record in a full store. acme (mallory 5) and
	// globex (bob 4, carol 1) hold as much: dave's own tenant, globex,
	// loses, and in it bob, its heaviest, his least recently used.
	dave := newShareClient(t, lab, url, "dave", "globex")
	if r := dave.callStateless("stateless"); r.Status != http.StatusOK || !strings.Contains(string(r.Body), "alpha:stateless") {
		t.Fatalf("a 2026-07-28 call in a full store: %v", r)
	}
	if r := bob.call(bs[0], "evicted?"); r.Status != http.StatusNotFound {
		t.Fatalf("bob's least recently used session: %v, want 404", r)
	}
	for _, sid := range bs[1:] {
		bob.mustCall(sid, "kept")
	}
	for _, sid := range slices.Concat(ms[2:], ms[:1]) {
		mallory.mustCall(sid, "kept")
	}
	// The evicted client of the first eviction initializes again
	// (2025-11-25 basic/transports, "Session Management" 4). acme
	// (mallory 5) holds as much as globex (bob 3, carol 1, dave 1), and
	// mallory the most of acme: she gives up her own least recently used.
	mallory.mustCall(mallory.mustOpen(), "back")
	if r := mallory.call(ms[2], "evicted?"); r.Status != http.StatusNotFound {
		t.Fatalf("mallory's least recently used session: %v, want 404", r)
	}
	for _, sid := range slices.Concat(ms[3:], ms[:1]) {
		mallory.mustCall(sid, "kept")
	}
	for _, sid := range bs[1:] {
		bob.mustCall(sid, "kept")
	}
	carol.mustCall(cs, "kept")
	if r := dave.callStateless("again"); r.Status != http.StatusOK {
		t.Fatalf("dave's 2026-07-28 call: %v", r)
	}
	// Each eviction counts at max_sessions; no one was refused.
	if n := limitCount(t, g, "max_sessions"); n != 3 {
		t.Errorf("max_sessions count = %d, want 3 evictions", n)
	}
}
