package echoserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestWithSDKClient checks the server with the go-sdk client, in both
// response modes: the echo tool, the extra tools, and the counts.
func TestWithSDKClient(t *testing.T) {
	for _, jsonResp := range []bool{false, true} {
		name := "sse"
		if jsonResp {
			name = "json"
		}
		t.Run(name, func(t *testing.T) {
			ts := httptest.NewServer(NewHandler(Options{ExtraTools: 1200, JSONResponse: jsonResp, Count: true}))
			defer ts.Close()
			c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
			cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ts.URL + Path, DisableStandaloneSSE: true}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer cs.Close()

			text := strings.Repeat("é\"\\x", 1000)
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Content) != 1 || res.IsError || res.Content[0].(*mcp.TextContent).Text != text {
				t.Errorf("echo result: %+v", res)
			}
			res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "t0042", Arguments: map[string]any{}})
			if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "ok" {
				t.Errorf("t0042: %+v, %v", res, err)
			}

			// One page holds every tool: the go-sdk would split 1201 into
			// two pages of its default size.
			lt, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(lt.Tools) != 1201 || lt.NextCursor != "" || lt.Tools[0].Name != "echo" && lt.Tools[0].Name != "t0000" {
				t.Errorf("tools/list: %d tools, next cursor %q", len(lt.Tools), lt.NextCursor)
			}

			resp, err := http.Get(ts.URL + StatsPath)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var st Stats
			if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
				t.Fatal(err)
			}
			if st.Methods["tools/list"] != 1 || st.Methods["tools/call"] != 2 || st.Methods["initialize"] != 1 || st.Requests < 5 {
				t.Errorf("stats: %+v", st)
			}
		})
	}
}

func TestEchoBadArguments(t *testing.T) {
	res, err := echo(t.Context(), &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "echo", Arguments: json.RawMessage(`{"text":1}`)}})
	if err != nil || !res.IsError {
		t.Errorf("echo with a number: %+v, %v", res, err)
	}
}

// TestRESTEcho checks the REST echo API: its document is JSON naming the
// echo operation, and a JSON body's text comes back as text/plain.
func TestRESTEcho(t *testing.T) {
	ts := httptest.NewServer(NewHandler(Options{}))
	defer ts.Close()
	resp, err := http.Get(ts.URL + RESTPath + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string `json:"openapi"`
		Paths   map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil || doc.OpenAPI != "3.1.0" || doc.Paths["/echo"]["post"].OperationID != "echo" {
		t.Fatalf("document: %+v, %v", doc, err)
	}
	text := strings.Repeat("é\"\\x", 100)
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, err = http.Post(ts.URL+RESTPath+"/echo", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(got) != text || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("echo: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), got)
	}
	resp, err = http.Post(ts.URL+RESTPath+"/echo", "application/json", strings.NewReader("{"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: %d", resp.StatusCode)
	}
}
