package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/tenant"
)

// viewLookup is a request's way into the catalog with a tenant's view:
// no listing is needed (every URI here names its upstream by prefix).
type viewLookup struct{ v *tenant.View }

func (lk viewLookup) Listing(context.Context, *Upstream, Kind) (*Listing, error) {
	return nil, errors.New("no listing")
}

func (lk viewLookup) Visible(k Kind, up *Upstream, original string) bool {
	return lk.v.Decide(tenant.Resource, up.Name, original).Allowed
}

// TestExposeUpdated: an update reaches a session in the gateway's
// namespace only when the session holds a subscription it belongs to,
// its tenant may see the resource, and the exposed URI is the upstream's
// own.
func TestExposeUpdated(t *testing.T) {
	noPrefix := ""
	cfg := &config.Config{
		Upstreams: []config.Upstream{{Name: "fs"}, {Name: "web"}, {Name: "plain", Prefix: &noPrefix}},
		Tenants: []config.Tenant{{ID: "acme", Upstreams: []config.TenantUpstream{
			{Name: "fs", Resources: config.Rules{Deny: []string{"file:///secret/*"}}}, {Name: "web"}, {Name: "plain"},
		}}},
	}
	c := testCatalog(t, time.Minute)
	c.Configure(cfg)
	view, err := tenant.NewSet(cfg).Get("acme")
	if err != nil {
		t.Fatal(err)
	}
	var ups []*Upstream
	for i := range cfg.Upstreams {
		u := NewUpstream(&cfg.Upstreams[i])
		ups = append(ups, &u)
	}
	fs, plain := ups[0], ups[2]
	updated := func(params string) *jsonrpc.Message {
		return &jsonrpc.Message{Kind: jsonrpc.KindNotification, Method: protocol.NotifyResourceUpdated, Params: json.RawMessage(params)}
	}
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name   string
		up     *Upstream
		params string
		held   func(string) bool
		want   string // the exposed uri; "" for none
	}{
		{"subscribed", fs, `{"uri":"file:///a.txt","title":"A"}`, all, "fs+file:///a.txt"},
		{"unprefixed upstream", plain, `{"uri":"note://1"}`, all, "note://1"},
		{"not subscribed", fs, `{"uri":"file:///a.txt"}`, func(u string) bool { return u == "file:///b.txt" }, ""},
		{"hidden by the tenant's rules", fs, `{"uri":"file:///secret/k"}`, all, ""},
		{"another upstream's namespace", plain, `{"uri":"fs+file:///a.txt"}`, all, ""},
		{"no uri", fs, `{}`, all, ""},
		{"params not an object", fs, `["file:///a.txt"]`, all, ""},
	} {
		got := c.ExposeUpdated(t.Context(), updated(tc.params), tc.up, view, tc.held, ups, viewLookup{view})
		if tc.want == "" {
			if got != nil {
				t.Errorf("%s: sent %s", tc.name, got)
			}
			continue
		}
		msg, err := jsonrpc.Decode(got)
		if err != nil {
			t.Fatalf("%s: %s: %v", tc.name, got, err)
		}
		var p map[string]string
		if msg.Kind != jsonrpc.KindNotification || msg.Method != protocol.NotifyResourceUpdated || json.Unmarshal(msg.Params, &p) != nil || p["uri"] != tc.want {
			t.Errorf("%s: sent %s, want uri %q", tc.name, got, tc.want)
		}
		if tc.name == "subscribed" && p["title"] != "A" {
			t.Errorf("%s: other params lost: %s", tc.name, msg.Params)
		}
	}
}

// TestExposeUpstreamRequest: a sampling request's tool results have their
// resource URIs exposed; any other request passes as it came.
func TestExposeUpstreamRequest(t *testing.T) {
	sampling := json.RawMessage(`{"messages":[{"role":"user","content":{"type":"tool_result","toolUseId":"1","content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}}],"maxTokens":10}`)
	got := ExposeUpstreamRequest(protocol.MethodCreateMessage, sampling, "fs")
	if !strings.Contains(string(got), `"uri":"fs+file:///a"`) {
		t.Errorf("sampling/createMessage: %s", got)
	}
	if got := ExposeUpstreamRequest(protocol.MethodCreateMessage, sampling, ""); string(got) != string(sampling) {
		t.Errorf("no prefix: %s", got)
	}
	elicit := json.RawMessage(`{"mode":"form","message":"resource_link file:///a","requestedSchema":{}}`)
	if got := ExposeUpstreamRequest(protocol.MethodElicit, elicit, "fs"); string(got) != string(elicit) {
		t.Errorf("elicitation/create changed: %s", got)
	}
}

// TestRefresh: the kinds shared by every caller are fetched again (and a
// change told through OnChange); the partitioned ones are told at once
// and not fetched; failures come back naming their list.
func TestRefresh(t *testing.T) {
	c := testCatalog(t, time.Minute)
	var onChange []Kind
	c.OnChange = func(_ string, k Kind) { onChange = append(onChange, k) }
	up := testRef("u", config.ListsShared)
	ctx := t.Context()
	serve := func(names ...string) FetchFunc {
		return func(context.Context, Bounds) ([]json.RawMessage, bool, error) { return tools(names...), false, nil }
	}
	if _, err := c.Get(ctx, up, Tools, Scope{}, serve("a")); err != nil {
		t.Fatal(err)
	}
	had, partitioned := c.Stale("u", Tools)

	var changed []Kind
	var fetched []Kind
	boom := errors.New("boom")
	err := c.Refresh(ctx, up, append(had, Prompts), append(partitioned, Resources), func(k Kind) { changed = append(changed, k) },
		func(_ context.Context, k Kind, _ Bounds) ([]json.RawMessage, bool, error) {
			fetched = append(fetched, k)
			if k == Prompts {
				return nil, false, boom
			}
			return tools("a", "b"), false, nil
		})
	if !slices.Equal(changed, []Kind{Resources}) {
		t.Errorf("told at once of %v, want the partitioned kinds", changed)
	}
	if !slices.Equal(fetched, []Kind{Tools, Prompts}) {
		t.Errorf("fetched %v", fetched)
	}
	if !slices.Equal(onChange, []Kind{Tools}) {
		t.Errorf("OnChange told of %v, want the changed tools", onChange)
	}
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), Prompts.Info().ListMethod) {
		t.Errorf("error %v", err)
	}
	if l := c.Fresh(up, Tools, Scope{}); l == nil || len(l.Items) != 2 {
		t.Errorf("the new list is not ready: %+v", l)
	}

	// A kind both had and partitioned is told, not fetched.
	changed, fetched = nil, nil
	if err := c.Refresh(ctx, up, []Kind{Tools}, []Kind{Tools}, func(k Kind) { changed = append(changed, k) },
		func(context.Context, Kind, Bounds) ([]json.RawMessage, bool, error) {
			fetched = append(fetched, Tools)
			return nil, false, nil
		}); err != nil || len(fetched) != 0 || !slices.Equal(changed, []Kind{Tools}) {
		t.Errorf("had and partitioned: told %v, fetched %v, error %v", changed, fetched, err)
	}
}
