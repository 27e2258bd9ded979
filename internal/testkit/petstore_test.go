package testkit

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// petStoreDo sends a request to the store and returns the status, the
// Content-Type and the body.
func petStoreDo(t *testing.T, method, url string, header http.Header, body string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(data)
}

func TestPetStoreDocument(t *testing.T) {
	s := StartPetStore(t, PetStoreOptions{})
	status, ctype, body := petStoreDo(t, http.MethodGet, s.DocumentURL, nil, "")
	if status != http.StatusOK || ctype != "application/json" {
		t.Fatalf("GET %s: %d %s", s.DocumentURL, status, ctype)
	}
	if body != string(s.Document) {
		t.Error("the document served is not PetStore.Document")
	}
	if want := strings.TrimSuffix(s.DocumentURL, "/openapi.json") + "/api/v1"; s.URL != want {
		t.Errorf("URL = %q, want %q (the relative server resolved against DocumentURL)", s.URL, want)
	}

	var doc struct {
		OpenAPI string `json:"openapi"`
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		Components struct {
			Schemas         map[string]json.RawMessage `json:"schemas"`
			SecuritySchemes map[string]json.RawMessage `json:"securitySchemes"`
		} `json:"components"`
	}
	if err := json.Unmarshal(s.Document, &doc); err != nil {
		t.Fatalf("the document is not JSON: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/api/v1" {
		t.Errorf("servers = %+v, want one, /api/v1", doc.Servers)
	}

	var ops []string
	withoutID := 0
	for path, item := range doc.Paths {
		for method, raw := range item {
			if method == "parameters" {
				continue
			}
			var op struct {
				OperationID string   `json:"operationId"`
				Summary     string   `json:"summary"`
				Description string   `json:"description"`
				Tags        []string `json:"tags"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			if op.Summary == "" || op.Description == "" || len(op.Tags) == 0 {
				t.Errorf("%s %s: summary, description or tags missing", method, path)
			}
			if op.OperationID == "" {
				withoutID++
				continue
			}
			ops = append(ops, op.OperationID)
		}
	}
	slices.Sort(ops)
	want := []string{"createPet", "deletePet", "echo", "failPet", "getPet", "listPets", "search", "whoAmI"}
	if diff := cmp.Diff(want, ops); diff != "" {
		t.Errorf("operationIds mismatch (-want +got):\n%s", diff)
	}
	if withoutID != 1 {
		t.Errorf("%d operations without operationId, want 1 (GET /health)", withoutID)
	}
	for _, name := range []string{"bearerAuth", "apiKey"} {
		if doc.Components.SecuritySchemes[name] == nil {
			t.Errorf("security scheme %s missing", name)
		}
	}

	// Every $ref names a schema of the document.
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				name, found := strings.CutPrefix(ref, "#/components/schemas/")
				if !found || doc.Components.Schemas[name] == nil {
					t.Errorf("$ref %q does not resolve", ref)
				}
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	var all any
	if err := json.Unmarshal(s.Document, &all); err != nil {
		t.Fatal(err)
	}
	walk(all)
}

func TestPetStoreEndpoints(t *testing.T) {
	s := StartPetStore(t, PetStoreOptions{APIKeys: map[string]string{"key-a": "tenant-a"}})
	// A JWT-shaped token: refused, since the store has no JWKS.
	seg := func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }
	jwt := seg(`{"alg":"RS256","typ":"at+jwt"}`) + "." + seg(`{"sub":"x","exp":9999999999}`) + "." + seg("sig")

	tests := []struct {
		name     string
		method   string
		path     string // under URL
		header   http.Header
		body     string
		status   int
		ctype    string // prefix of the Content-Type
		contains string // in the body
	}{
		{name: "list", method: "GET", path: "/pets", status: 200, contains: `"total":3`},
		{name: "list limit", method: "GET", path: "/pets?limit=1", status: 200, contains: `{"pets":[{"id":"1",`},
		{name: "list limit too big", method: "GET", path: "/pets?limit=101", status: 400, contains: `"code":400`},
		{name: "list limit zero", method: "GET", path: "/pets?limit=0", status: 400},
		{name: "list tags", method: "GET", path: "/pets?tag=cat&tag=good", status: 200, contains: `"total":2`},
		{name: "list status", method: "GET", path: "/pets?status=sold", status: 200, contains: `"total":2`},
		{name: "list bad status", method: "GET", path: "/pets?status=lost", status: 400},
		{name: "create", method: "POST", path: "/pets", header: http.Header{"Content-Type": {"application/json"}},
			body: `{"name":"Kit","tag":"cat"}`, status: 201, contains: `"id":"4"`},
		{name: "create without name", method: "POST", path: "/pets", header: http.Header{"Content-Type": {"application/json"}},
			body: `{"tag":"cat"}`, status: 400, contains: `name is required`},
		{name: "create unknown field", method: "POST", path: "/pets", header: http.Header{"Content-Type": {"application/json"}},
			body: `{"name":"a","legs":4}`, status: 400},
		{name: "create not JSON", method: "POST", path: "/pets", header: http.Header{"Content-Type": {"application/json"}},
			body: `name=a`, status: 400},
		{name: "create trailing data", method: "POST", path: "/pets", header: http.Header{"Content-Type": {"application/json"}},
			body: `{"name":"a"} {}`, status: 400},
		{name: "create text", method: "POST", path: "/pets", body: `{"name":"a"}`, status: 400},
		{name: "get", method: "GET", path: "/pets/2", status: 200, contains: `"owner":{"name":"Ada"`},
		{name: "get null tag", method: "GET", path: "/pets/3", status: 200, contains: `"tag":null`},
		{name: "get missing", method: "GET", path: "/pets/99", status: 404, contains: `{"code":404,"message":"pet not found"}`},
		{name: "delete without token", method: "DELETE", path: "/pets/1", status: 401},
		{name: "delete with a token no JWKS verifies", method: "DELETE", path: "/pets/1",
			header: http.Header{"Authorization": {"Bearer " + jwt}}, status: 401, contains: "unknown token"},
		{name: "whoami", method: "GET", path: "/whoami", header: http.Header{"X-Api-Key": {"key-a"}},
			status: 200, contains: `{"authorization":"none","tenant":"tenant-a"}`},
		{name: "whoami with authorization", method: "GET", path: "/whoami",
			header: http.Header{"X-Api-Key": {"key-a"}, "Authorization": {"Bearer x"}},
			status: 200, contains: `"authorization":"bearer"`},
		{name: "whoami without key", method: "GET", path: "/whoami", status: 401},
		{name: "whoami unknown key", method: "GET", path: "/whoami", header: http.Header{"X-Api-Key": {"key-b"}}, status: 401},
		{name: "echo", method: "POST", path: "/echo/a%2Fb%20c?n=7", header: http.Header{"X-Trace-Note": {"hi"}},
			body: `{"x": [1, 2]}`, status: 200,
			contains: `{"word":"a/b c","rawPath":"/api/v1/echo/a%2Fb%20c","n":7,"note":"hi","body":{"x":[1,2]}}`},
		{name: "echo empty", method: "POST", path: "/echo/w", status: 200,
			contains: `{"word":"w","rawPath":"/api/v1/echo/w","n":null,"note":null,"body":null}`},
		{name: "echo bad n", method: "POST", path: "/echo/w?n=x", status: 400},
		{name: "echo array body", method: "POST", path: "/echo/w", body: `[1]`, status: 400},
		{name: "fail", method: "GET", path: "/fail", status: 500, ctype: "text/plain", contains: "internal failure: database on fire\n"},
		{name: "search", method: "GET", path: "/search?q=red+fish", status: 200, ctype: "text/plain", contains: "results for red fish"},
		{name: "search without q", method: "GET", path: "/search", status: 400},
		{name: "health", method: "GET", path: "/health", status: 200, contains: `{"ok":true}`},
		{name: "unknown path", method: "GET", path: "/nothing", status: 404},
		{name: "wrong method", method: "PUT", path: "/pets", status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, ctype, body := petStoreDo(t, tt.method, s.URL+tt.path, tt.header, tt.body)
			if status != tt.status {
				t.Errorf("%s %s: status %d, want %d; body %.200q", tt.method, tt.path, status, tt.status, body)
			}
			if tt.ctype != "" && !strings.HasPrefix(ctype, tt.ctype) {
				t.Errorf("Content-Type %q, want %s", ctype, tt.ctype)
			}
			if !strings.Contains(body, tt.contains) {
				t.Errorf("body %.300q does not contain %q", body, tt.contains)
			}
		})
	}

	_, _, body := petStoreDo(t, "GET", s.URL+"/fail", nil, "")
	if len(body) < 5*1024 {
		t.Errorf("failPet body has %d bytes, want over 5 KiB", len(body))
	}
}

func TestPetStoreRequests(t *testing.T) {
	s := StartPetStore(t, PetStoreOptions{APIKeys: map[string]string{"key-a": "tenant-a"}})
	petStoreDo(t, "GET", s.DocumentURL, nil, "")
	petStoreDo(t, "GET", s.URL+"/whoami", http.Header{"X-Api-Key": {"key-a"}, "Authorization": {"Bearer secret"}}, "")
	petStoreDo(t, "POST", s.URL+"/echo/a%2Fb?n=1&n=2", nil, `{"a":1}`)

	got := s.Requests()
	if len(got) != 2 {
		t.Fatalf("%d requests remembered, want 2 (the document's fetch is not one): %+v", len(got), got)
	}
	for i := range got {
		if got[i].Header.Get("Authorization") != "" {
			t.Errorf("request %d: Header holds the Authorization", i)
		}
		got[i].Header = nil
	}
	want := []PetStoreRequest{
		{Method: "GET", Path: "/api/v1/whoami", Authorization: true, APIKey: "key-a", Tenant: "tenant-a", Body: []byte{}},
		{Method: "POST", Path: "/api/v1/echo/a%2Fb", Query: "n=1&n=2", Body: []byte(`{"a":1}`)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests mismatch (-want +got):\n%s", diff)
	}

	s.Reset()
	if got := s.Requests(); len(got) != 0 {
		t.Errorf("after Reset, %d requests", len(got))
	}
}

func TestPetStoreBounds(t *testing.T) {
	s := StartPetStore(t, PetStoreOptions{})
	jsonType := http.Header{"Content-Type": {"application/json"}}
	for i := 3; i < petStoreMaxPets; i++ {
		if status, _, body := petStoreDo(t, "POST", s.URL+"/pets", jsonType, `{"name":"p"}`); status != 201 {
			t.Fatalf("pet %d: %d %s", i+1, status, body)
		}
	}
	if status, _, _ := petStoreDo(t, "POST", s.URL+"/pets", jsonType, `{"name":"one too many"}`); status != http.StatusInsufficientStorage {
		t.Errorf("pet %d: status %d, want 507", petStoreMaxPets+1, status)
	}
	if status, _, _ := petStoreDo(t, "POST", s.URL+"/echo/big", nil, strings.Repeat(" ", petStoreMaxBody+1)); status != http.StatusRequestEntityTooLarge {
		t.Errorf("a body over 1 MiB: status %d, want 413", status)
	}
	if status, _, body := petStoreDo(t, "GET", s.URL+"/pets?limit=100", nil, ""); status != 200 || !strings.Contains(body, `"total":1000`) {
		t.Errorf("list: %d %.100s", status, body)
	}
}
