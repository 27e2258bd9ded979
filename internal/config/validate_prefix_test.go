package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEmptyPrefixWarning: an upstream with prefix "" beside other upstreams
// is warned about (its names could collide with theirs, and names in
// their namespaces are dropped from it); alone, it is not.
func TestEmptyPrefixWarning(t *testing.T) {
	const yaml = `upstreams:
  - name: alpha
    url: http://alpha/mcp
  - name: plain
    url: http://plain/mcp
    prefix: ""
auth:
  anonymous: true
`
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	const msg = `is "" beside other upstreams: its names may collide with theirs (a name two upstreams list is hidden), ` +
		`and the names it lists in another upstream's namespace ("<prefix>__...", "<prefix>+...") are dropped from it`
	var got []string
	for _, w := range c.Warnings {
		got = append(got, w.Error())
	}
	if diff := cmp.Diff([]string{"test.yaml:6: upstreams[1].prefix: " + msg}, got); diff != "" {
		t.Errorf("warnings mismatch (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		ups  []Upstream
		want []Problem
	}{
		{"alone", []Upstream{{Name: "plain", URL: "http://p/mcp", Prefix: ptrTo("")}}, nil},
		{"all prefixed", []Upstream{{Name: "a", URL: "http://a/mcp"}, {Name: "b", URL: "http://b/mcp", Prefix: ptrTo("bee")}}, nil},
		{"first of three", []Upstream{{Name: "plain", URL: "http://p/mcp", Prefix: ptrTo("")}, {Name: "a", URL: "http://a/mcp"}, {Name: "b", URL: "http://b/mcp"}},
			[]Problem{{Path: "upstreams[0].prefix", Msg: msg}}},
	} {
		c := &Config{Upstreams: tc.ups, Auth: Auth{Anonymous: true}}
		c.ApplyDefaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("%s: Validate: %v", tc.name, err)
		}
		if diff := cmp.Diff(tc.want, c.Warnings); diff != "" {
			t.Errorf("%s: warnings mismatch (-want +got):\n%s", tc.name, diff)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
