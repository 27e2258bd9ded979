package catalog

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// TestPinCanonical: a pin does not change with key order or spacing, and
// names the fields that did change.
func TestPinCanonical(t *testing.T) {
	a, _ := PinOf(Tools, json.RawMessage(`{"name":"t","description":"d","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.50}}},"icons":[1]}`))
	b, _ := PinOf(Tools, json.RawMessage(`{ "inputSchema" : {"properties":{"x":{"maximum":1.50,"type":"number"}},"type":"object"}, "description":"d","name":"t"}`))
	if a.SHA256 != b.SHA256 {
		t.Fatalf("re-encoding changed the pin")
	}
	c, _ := PinOf(Tools, json.RawMessage(`{"name":"t","description":"d2","inputSchema":{"type":"object","properties":{"x":{"type":"number","maximum":1.5}}},"annotations":{}}`))
	if got := ChangedFields(a, c); !slices.Equal(got, []string{"annotations", "description", "inputSchema"}) {
		t.Errorf("changed fields %v", got)
	}
	if _, ok := PinOf(Resources, json.RawMessage(`{"uri":"x"}`)); ok {
		t.Error("resources are pinned")
	}
}

func pinnedUpstream(onChange, newItems string, raws ...string) *Upstream {
	pins := &config.UpstreamPins{Tools: map[string]config.PinnedItem{}}
	for _, r := range raws {
		var o struct{ Name string }
		_ = json.Unmarshal([]byte(r), &o)
		pins.Tools[o.Name], _ = PinOf(Tools, json.RawMessage(r))
	}
	pol := &config.UpstreamPin{OnChange: onChange, New: newItems}
	pol.SetPinned(pins)
	return &Upstream{Name: "u", Prefix: "u", Shared: true, Timeout: time.Second, Pin: pol}
}

func names(l *Listing) []string {
	var out []string
	for _, it := range l.Items {
		out = append(out, it.Original)
	}
	return out
}

// TestPinBuild: a listing is checked against the pins as it is built;
// quarantined items are left out; each mismatch is reported once, and
// kept within maxPinStatus; a call checks the item it resolved to.
func TestPinBuild(t *testing.T) {
	pinnedRaws := []string{`{"name":"a","description":"A"}`, `{"name":"b","description":"B"}`}
	listed := []json.RawMessage{
		json.RawMessage(`{"name":"a","description":"A, and more"}`), // changed
		json.RawMessage(`{"name":"b","description":"B"}`),           // as pinned
		json.RawMessage(`{"name":"c","description":"C"}`),           // new
	}
	for _, tc := range []struct {
		onChange, new string
		want          []string
	}{
		{config.PinQuarantine, config.PinAllow, []string{"b", "c"}},
		{config.PinWarn, config.PinQuarantine, []string{"a", "b"}},
		{config.PinAllow, config.PinAllow, []string{"a", "b", "c"}},
	} {
		t.Run(tc.onChange+"/"+tc.new, func(t *testing.T) {
			c := New(time.Minute, slog.New(slog.DiscardHandler), nil)
			var reported []PinStatus
			c.OnPin = func(s PinStatus) { reported = append(reported, s) }
			up := pinnedUpstream(tc.onChange, tc.new, pinnedRaws...)
			l := c.build(up, Tools, listed)
			if got := names(l); !slices.Equal(got, tc.want) {
				t.Errorf("listed %v, want %v", got, tc.want)
			}
			if len(reported) != 2 || reported[0].Name == reported[1].Name {
				t.Errorf("reported %+v", reported)
			}
			c.build(up, Tools, listed)
			if len(reported) != 2 {
				t.Errorf("a known mismatch reported again: %+v", reported[2:])
			}
			if got := len(c.PinMismatches()); got != 2 {
				t.Errorf("%d mismatches kept", got)
			}
			// At call time, against the pins of the request's snapshot.
			for i := range l.Items {
				it := &l.Items[i]
				if !PinAllows(up.Pin, Tools, it) {
					t.Errorf("%s listed but not callable", it.Original)
				}
			}
			strict := pinnedUpstream(config.PinQuarantine, config.PinQuarantine, pinnedRaws...)
			for i := range l.Items {
				it := &l.Items[i]
				if want := it.Original == "b"; PinAllows(strict.Pin, Tools, it) != want {
					t.Errorf("%s callable under stricter pins: %v", it.Original, !want)
				}
			}
		})
	}
}

// TestPinStatusBound: past maxPinStatus mismatches per upstream and kind,
// they are counted but not kept.
func TestPinStatusBound(t *testing.T) {
	old := maxPinStatus
	t.Cleanup(func() { maxPinStatus = old })
	maxPinStatus = 2
	c := New(time.Minute, slog.New(slog.DiscardHandler), nil)
	n := 0
	c.OnPin = func(PinStatus) { n++ }
	up := pinnedUpstream(config.PinQuarantine, config.PinQuarantine)
	var listed []json.RawMessage
	for i := range 5 {
		listed = append(listed, json.RawMessage(fmt.Sprintf(`{"name":"t%d"}`, i)))
	}
	if l := c.build(up, Tools, listed); len(l.Items) != 0 {
		t.Errorf("listed %v", names(l))
	}
	if e := c.pins[pinKey{"u", Tools}]; len(e.items) != 2 || e.quarantined != 5 || n != 5 {
		t.Errorf("kept %d, quarantined %d, reported %d", len(e.items), e.quarantined, n)
	}
	c.Invalidate("u", Tools)
	if len(c.PinMismatches()) != 0 {
		t.Error("invalidate kept the mismatches")
	}
}
