package catalog

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestExposeToolResult(t *testing.T) {
	for _, tc := range []struct {
		name, prefix, in, want string
	}{
		{
			name: "no prefix", prefix: "",
			in:   `{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
			want: `{"content":[{"type":"resource_link","uri":"file:///a","name":"a"}]}`,
		},
		{
			name: "nothing about resources", prefix: "gh",
			in:   `{"content":[{"type":"text","text":"hi"}],"isError":false}`,
			want: `{"content":[{"type":"text","text":"hi"}],"isError":false}`,
		},
		{
			name: "link, embedded resource and text", prefix: "gh",
			in:   `{"content":[ {"type":"text","text":"see resource below"}, {"type":"resource_link","uri":"file:///a","name":"a"},{"type":"resource","resource":{"uri":"ui://w/x","mimeType":"text/html","text":"<p>"}} ],"structuredContent":{"uri":"file:///kept"}}`,
			want: `{"content":[ {"type":"text","text":"see resource below"}, {"type":"resource_link","uri":"gh+file:///a","name":"a"},{"type":"resource","resource":{"uri":"gh+ui://w/x","mimeType":"text/html","text":"<p>"}} ],"structuredContent":{"uri":"file:///kept"}}`,
		},
		{
			name: "UI link in the result's _meta", prefix: "gh",
			in:   `{"content":[],"_meta":{"ui":{"resourceUri":"ui://w/x","other":1},"ui/resourceUri":"ui://w/y"}}`,
			want: `{"content":[],"_meta":{"ui":{"resourceUri":"gh+ui://w/x","other":1},"ui/resourceUri":"gh+ui://w/y"}}`,
		},
		{
			name: "hostile shapes pass through", prefix: "gh",
			in:   `{"content":[{"type":"resource_link","uri":7},{"type":"resource","resource":"x"},"resource",{"type":"resource_link"}],"_meta":{"ui":"resourceUri"}}`,
			want: `{"content":[{"type":"resource_link","uri":7},{"type":"resource","resource":"x"},"resource",{"type":"resource_link"}],"_meta":{"ui":"resourceUri"}}`,
		},
		{
			name: "content not an array", prefix: "gh",
			in:   `{"content":{"type":"resource_link","uri":"file:///a"}}`,
			want: `{"content":{"type":"resource_link","uri":"file:///a"}}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !json.Valid([]byte(tc.in)) {
				t.Fatalf("test input is not JSON: %s", tc.in)
			}
			if got := string(ExposeToolResult(json.RawMessage(tc.in), tc.prefix)); got != tc.want {
				t.Errorf("ExposeToolResult:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestExposePromptResult(t *testing.T) {
	in := `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"x"}},{"role":"user","content":{"type":"resource_link","uri":"file:///a","name":"a"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"file:///b","text":"b"}}}]}`
	want := `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"x"}},{"role":"user","content":{"type":"resource_link","uri":"gh+file:///a","name":"a"}},{"role":"assistant","content":{"type":"resource","resource":{"uri":"gh+file:///b","text":"b"}}}]}`
	if got := string(ExposePromptResult(json.RawMessage(in), "gh")); got != want {
		t.Errorf("ExposePromptResult:\n got %s\nwant %s", got, want)
	}
	if got := string(ExposePromptResult(json.RawMessage(in), "")); got != in {
		t.Errorf("ExposePromptResult without prefix changed the result: %s", got)
	}
}

// TestExposeContentBlocksBound: a result of many small blocks costs memory
// in proportion to its size, not to its number of elements: untouched
// blocks are copied as bytes, never parsed.
func TestExposeContentBlocksBound(t *testing.T) {
	const n = 200_000
	blocks := json.RawMessage(`[` + strings.Repeat(`{},`, n) + `{"type":"resource_link","uri":"u"}]`)
	var got json.RawMessage
	allocs := testing.AllocsPerRun(3, func() { got, _ = ExposeContentBlocks(blocks, "p") })
	if !strings.HasSuffix(string(got), `{"type":"resource_link","uri":"p+u"}]`) || len(got) != len(blocks)+2 {
		t.Fatalf("ExposeContentBlocks: %d bytes, ending %q", len(got), got[len(got)-40:])
	}
	if allocs > 20 {
		t.Errorf("ExposeContentBlocks of %d blocks: %v allocations, want a few", n+1, allocs)
	}
}

// TestExposeSamplingParams: the resource URIs in the tool results of a
// sampling request are exposed, in a single content and in an array, and
// nothing else changes.
func TestExposeSamplingParams(t *testing.T) {
	link := `{"type":"resource_link","uri":"file:///a","name":"a"}`
	in := `{"messages":[` +
		`{"role":"user","content":{"type":"text","text":"resource"}},` +
		`{"role":"user","content":{"type":"tool_result","toolUseId":"1","content":[` + link + `]}},` +
		`{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","toolUseId":"2","content":[{"type":"resource","resource":{"uri":"file:///b","text":"b"}}]}]}` +
		`],"maxTokens":5}`
	want := `{"messages":[` +
		`{"role":"user","content":{"type":"text","text":"resource"}},` +
		`{"role":"user","content":{"type":"tool_result","toolUseId":"1","content":[{"type":"resource_link","uri":"fs+file:///a","name":"a"}]}},` +
		`{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","toolUseId":"2","content":[{"type":"resource","resource":{"uri":"fs+file:///b","text":"b"}}]}]}` +
		`],"maxTokens":5}`
	if got := string(ExposeSamplingParams(json.RawMessage(in), "fs")); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := string(ExposeSamplingParams(json.RawMessage(in), "")); got != in {
		t.Errorf("no prefix changed %s", got)
	}
	plain := `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}]}`
	if got := string(ExposeSamplingParams(json.RawMessage(plain), "fs")); got != plain {
		t.Errorf("plain changed: %s", got)
	}
}

// TestExposeReadResult: each contents[].uri is exposed for the prefix,
// every other byte stays; no prefix passes the result as it is, and a
// malformed one is an error.
func TestExposeReadResult(t *testing.T) {
	in := `{"contents":[{"uri":"file:///a","text":"x"}, {"blob":"AA=="},{"uri":"file:///b","mimeType":"text/plain"}],"_meta":{"k":1}}`
	got, err := ExposeReadResult(json.RawMessage(in), "fs")
	want := `{"contents":[{"uri":"fs+file:///a","text":"x"}, {"blob":"AA=="},{"uri":"fs+file:///b","mimeType":"text/plain"}],"_meta":{"k":1}}`
	if err != nil || string(got) != want {
		t.Errorf("ExposeReadResult = %s, %v\nwant %s", got, err, want)
	}
	if got, err := ExposeReadResult(json.RawMessage(in), ""); err != nil || string(got) != in {
		t.Errorf("no prefix: %s, %v", got, err)
	}
	if _, err := ExposeReadResult(json.RawMessage(`{"contents":`), "fs"); err == nil {
		t.Error("a malformed result passed")
	}
}
