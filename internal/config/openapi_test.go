package config

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// petsDoc is a small OpenAPI 3.1 document with two operations.
const petsDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "pets", "version": "1"},
  "servers": [{"url": "https://pets.example/api"}],
  "paths": {
    "/pets": {"get": {"operationId": "listPets", "responses": {"200": {"description": "ok"}}}},
    "/pets/{id}": {"get": {"operationId": "getPet",
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok"}}}}
  }
}`

// TestParseOpenAPI: an openapi upstream's document is read and kept with
// the config (so that a changed document makes a changed config), and its
// transport is implied by the openapi key.
func TestParseOpenAPI(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "pets.json")
	if err := os.WriteFile(doc, []byte(petsDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(petsDoc))
	}))
	defer srv.Close()
	yaml := `
upstreams:
  - name: pets
    openapi:
      document: ` + doc + `
      include: [listPets]
    headers:
      X-Api-Key: k
  - name: remote
    transport: openapi
    openapi:
      document: ` + srv.URL + `/openapi.json
      base_url: https://elsewhere.example/v2
` + anon
	c, err := Parse("test.yaml", []byte(yaml), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range c.Upstreams {
		if !u.IsOpenAPI() || u.IsStdio() || u.Watches() {
			t.Errorf("upstream %d: openapi %v, stdio %v, watched %v", i, u.IsOpenAPI(), u.IsStdio(), u.Watches())
		}
		if string(u.OpenAPI.Source()) != petsDoc {
			t.Errorf("upstream %d: source %q", i, u.OpenAPI.Source())
		}
		if u.OpenAPI.MaxDocumentBytes != DefaultMaxDocumentBytes {
			t.Errorf("upstream %d: max_document_bytes %d", i, u.OpenAPI.MaxDocumentBytes)
		}
	}
	if o := c.Upstreams[0].OpenAPI.Options("pets"); o.Name != "pets" || o.DocumentURL != doc || len(o.Include) != 1 {
		t.Errorf("options: %+v", o)
	}
}

func TestParseOpenAPIProblems(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "pets.json")
	if err := os.WriteFile(doc, []byte(petsDoc), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(strings.Replace(petsDoc, `"pets"`, `"`+strings.Repeat("p", 2000)+`"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	yaml := `
upstreams:
  - name: a
    url: http://a/mcp
    watch: true
    openapi:
      document: ` + doc + `
      base_url: ftp://pets.example
      include: [""]
  - name: b
    transport: openapi
  - name: c
    openapi:
      document: ` + big + `
      max_document_bytes: 1000
  - name: d
    openapi:
      document: ` + missing + `
  - name: e
    url: http://e/mcp
    transport: streamable_http
    openapi:
      document: ` + doc + `
` + anon
	_, err := Parse("test.yaml", []byte(yaml), env(nil))
	got := problemLines(t, err)
	want := []string{
		"test.yaml:4: upstreams[0].url: does not apply to an openapi upstream (its requests go to openapi.base_url or the document's servers)",
		"test.yaml:5: upstreams[0].watch: does not apply to an openapi upstream: its tools change with its document, at a reload",
		"test.yaml:8: upstreams[0].openapi.base_url: must be an absolute http or https URL",
		`test.yaml:9: upstreams[0].openapi.include[0]: must not be empty`,
		"test.yaml:10: upstreams[1].openapi: is required for an openapi upstream: the API's document",
		"test.yaml:14: upstreams[2].openapi.document: is larger than 1000 bytes (openapi.max_document_bytes)",
		"test.yaml:18: upstreams[3].openapi.document: cannot be read: open " + missing + ": no such file or directory",
		"test.yaml:22: upstreams[4].openapi: applies to openapi upstreams only (transport: openapi)",
	}
	if diff := cmp.Diff(want, got, cmp.Transformer("sort", sortedStrings)); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}
