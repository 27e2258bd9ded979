package openapi

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// storeDoc is an OpenAPI 3.1 document with parameters in every location,
// a body by reference, a recursive schema and an operation without an id.
const storeDoc = `{
  "openapi": "3.1.0",
  "info": {"title": "store", "version": "2.0", "description": "The store's API."},
  "servers": [{"url": "https://{host}/v1", "variables": {"host": {"default": "store.example"}}}],
  "paths": {
    "/items/{itemId}": {
      "parameters": [{"name": "itemId", "in": "path", "required": true, "schema": {"type": "string"}, "description": "The item."}],
      "get": {
        "operationId": "get item!", "summary": "Get an item", "tags": ["items"],
        "parameters": [
          {"name": "fields", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
          {"name": "X-Tenant-Hint", "in": "header", "schema": {"type": "string"}},
          {"name": "Authorization", "in": "header", "schema": {"type": "string"}},
          {"name": "session", "in": "cookie", "schema": {"type": "string"}}
        ],
        "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}}}
      },
      "delete": {"operationId": "deleteItem", "tags": ["admin"], "responses": {"204": {"description": "gone"}}}
    },
    "/items": {
      "post": {
        "operationId": "createItem", "description": "Creates an item.",
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}},
        "responses": {"201": {"description": "ok", "content": {"application/json": {"schema": {"type": "array"}}}}}
      },
      "get": {"responses": {"200": {"description": "ok"}}}
    },
    "/upload": {
      "put": {"operationId": "upload", "requestBody": {"required": true, "content": {"application/octet-stream": {}}}, "responses": {"200": {"description": "ok"}}}
    },
    "/m/{id}": {
      "get": {"operationId": "matrix", "parameters": [{"name": "id", "in": "path", "required": true, "style": "matrix", "schema": {"type": "string"}}], "responses": {"200": {"description": "ok"}}}
    }
  },
  "components": {"schemas": {
    "Item": {"type": "object", "required": ["name"], "properties": {
      "name": {"type": "string"},
      "tag": {"type": ["string", "null"]},
      "kind": {"const": "item"},
      "parent": {"$ref": "#/components/schemas/Item"}
    }}
  }}
}`

func compileOK(t *testing.T, doc string, opts Options) *API {
	t.Helper()
	a, err := Compile([]byte(doc), opts)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func tools(t *testing.T, a *API) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, raw := range a.Tools() {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		out[m["name"].(string)] = m
	}
	return out
}

func TestCompile(t *testing.T) {
	a := compileOK(t, storeDoc, Options{Name: "store"})
	ts := tools(t, a)
	if got := slices.Sorted(func(y func(string) bool) {
		for k := range ts {
			if !y(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"createItem", "deleteItem", "get_item_"}) {
		t.Fatalf("tools: %v", got)
	}
	if a.BaseURL() != "https://store.example/v1" {
		t.Errorf("base URL %q", a.BaseURL())
	}
	get := ts["get_item_"]
	if get["title"] != "Get an item" || get["description"] != "Get an item" {
		t.Errorf("title, description: %v %v", get["title"], get["description"])
	}
	in := get["inputSchema"].(map[string]any)
	props := in["properties"].(map[string]any)
	for _, k := range []string{"itemId", "fields", "X-Tenant-Hint", "session"} {
		if props[k] == nil {
			t.Errorf("no property %q: %v", k, props)
		}
	}
	if props["Authorization"] != nil {
		t.Error("an Authorization header parameter became an argument")
	}
	if d := props["itemId"].(map[string]any)["description"]; d != "The item." {
		t.Errorf("path-level parameter description: %v", d)
	}
	if diff := cmp.Diff([]any{"itemId"}, in["required"]); diff != "" {
		t.Errorf("required: %s", diff)
	}
	ann := get["annotations"].(map[string]any)
	if ann["readOnlyHint"] != true || ann["idempotentHint"] != true || ann["openWorldHint"] != true {
		t.Errorf("GET annotations: %v", ann)
	}
	if ann := ts["deleteItem"]["annotations"].(map[string]any); ann["destructiveHint"] != true {
		t.Errorf("DELETE annotations: %v", ann)
	}
	// The output is the Item object, its recursion cut at the point it
	// recurs.
	out := get["outputSchema"].(map[string]any)
	op := out["properties"].(map[string]any)
	if diff := cmp.Diff(map[string]any{}, op["parent"]); diff != "" {
		t.Errorf("recursive property: %s", diff)
	}
	if diff := cmp.Diff([]any{"string", "null"}, op["tag"].(map[string]any)["type"]); diff != "" {
		t.Errorf("3.1 type union: %s", diff)
	}
	if op["kind"].(map[string]any)["const"] != "item" {
		t.Errorf("const lost: %v", op["kind"])
	}
	create := ts["createItem"]
	if create["description"] != "Creates an item." || create["outputSchema"] != nil {
		t.Errorf("createItem: %v", create)
	}
	cin := create["inputSchema"].(map[string]any)
	if cmp.Diff([]any{"body"}, cin["required"]) != "" || cin["properties"].(map[string]any)["body"].(map[string]any)["type"] != "object" {
		t.Errorf("createItem input: %v", cin)
	}
	w := strings.Join(a.Warnings(), "\n")
	for _, want := range []string{"PUT /upload: skipped", "GET /m/{id}: skipped", "refers to itself"} {
		if !strings.Contains(w, want) {
			t.Errorf("warnings lack %q:\n%s", want, w)
		}
	}
}

func TestCompileSelectors(t *testing.T) {
	for _, tc := range []struct {
		include, exclude []string
		want             []string
	}{
		{include: []string{"tag:admin"}, want: []string{"deleteItem"}},
		{include: []string{"* /items/*"}, want: []string{"deleteItem", "get_item_"}},
		{include: []string{"GET /**"}, want: []string{"get_items", "get_item_"}}, // matrix: skipped
		{exclude: []string{"deleteItem", "tag:items"}, want: []string{"createItem"}},
	} {
		a := compileOK(t, storeDoc, Options{Include: tc.include, Exclude: tc.exclude})
		var got []string
		for name := range tools(t, a) {
			got = append(got, name)
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("include %v exclude %v: %v, want %v", tc.include, tc.exclude, got, want)
		}
	}
	if _, err := Compile([]byte(storeDoc), Options{Include: []string{"GET pets"}}); err == nil {
		t.Error("a path selector without / was accepted")
	}
}

func TestCompileErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		doc  string
		opts Options
		want string
	}{
		"collision": {doc: strings.Replace(storeDoc, `"deleteItem"`, `"get item?"`, 1), want: `both make the tool name "get_item_"`},
		"no server": {doc: `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"paths":{}}`, want: "names no server"},
		"relative":  {doc: `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"servers":[{"url":"/api"}],"paths":{}}`, opts: Options{DocumentURL: "api.json"}, want: "is relative"},
		"swagger":   {doc: `{"swagger":"2.0","info":{"title":"x","version":"1"},"paths":{}}`, want: "only 3.0 and 3.1"},
		"not json":  {doc: `{{`, want: "not an OpenAPI document"},
		"external": {doc: strings.Replace(storeDoc, `"#/components/schemas/Item"}}}},
        "responses": {"201"`, `"other.json#/Item"}}}},
        "responses": {"201"`, 1), want: ""},
	} {
		_, err := Compile([]byte(tc.doc), tc.opts)
		if tc.want == "" {
			if err == nil {
				t.Errorf("%s: compiled", name)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
	// A relative server resolves against the document's URL.
	a := compileOK(t, `{"openapi":"3.1.0","info":{"title":"x","version":"1"},"servers":[{"url":"/api/v1"}],"paths":{}}`, Options{DocumentURL: "http://h.example/docs/openapi.json"})
	if a.BaseURL() != "http://h.example/api/v1" {
		t.Errorf("relative server: %s", a.BaseURL())
	}
}

// TestCompileBombBounded: references that double at each level expand
// past the bound and fail, rather than growing without one.
func TestCompileBombBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"openapi":"3.0.3","info":{"title":"x","version":"1"},"servers":[{"url":"http://x"}],"paths":{"/a":{"post":{"operationId":"a","requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/S0"}}}},"responses":{"200":{"description":"ok"}}}}},"components":{"schemas":{`)
	for i := range 30 {
		if i > 0 {
			b.WriteString(",")
		}
		next := "S" + strconv.Itoa(i+1)
		if i == 29 {
			b.WriteString(`"S29":{"type":"string","nullable":true}`)
			break
		}
		b.WriteString(`"S` + strconv.Itoa(i) + `":{"type":"object","properties":{"l":{"$ref":"#/components/schemas/` + next + `"},"r":{"$ref":"#/components/schemas/` + next + `"}}}`)
	}
	b.WriteString(`}}}`)
	_, err := Compile([]byte(b.String()), Options{})
	if err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("bomb: %v", err)
	}
}

// TestCompile30YAML: an OpenAPI 3.0 document in YAML, with nullable and
// example, becomes JSON Schema.
func TestCompile30YAML(t *testing.T) {
	doc := `
openapi: 3.0.3
info: {title: legacy, version: "1"}
servers: [{url: "http://legacy.example"}]
paths:
  /things:
    get:
      operationId: listThings
      parameters:
        - {name: q, in: query, required: true, schema: {type: string, nullable: true, example: abc}}
      responses:
        "200":
          description: ok
          content:
            application/json:
              schema: {type: object, properties: {n: {type: integer, xml: {name: n}}}, discriminator: {propertyName: n}}
`
	a := compileOK(t, doc, Options{})
	tl := tools(t, a)["listThings"]
	q := tl["inputSchema"].(map[string]any)["properties"].(map[string]any)["q"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"type": []any{"string", "null"}, "examples": []any{"abc"}}, q); diff != "" {
		t.Errorf("q: %s", diff)
	}
	out := tl["outputSchema"].(map[string]any)
	if out["discriminator"] != nil || out["properties"].(map[string]any)["n"].(map[string]any)["xml"] != nil {
		t.Errorf("OpenAPI-only keywords kept: %v", out)
	}
}

// TestPublicDocuments compiles public documents kept as fixtures (see
// testdata/README.md).
func TestPublicDocuments(t *testing.T) {
	for _, tc := range []struct {
		file  string
		tools int
		names []string
	}{
		{file: "petstore-3.0.json", tools: 20, names: []string{"addPet", "findPetsByStatus", "getInventory", "loginUser"}},
		{file: "petstore-3.1.yaml", tools: 20, names: []string{"updatePet", "getPetById", "deleteOrder"}},
		// The eighth operationId is a webhook's, which is not an operation.
		{file: "train-travel-3.1.yaml", tools: 7, names: []string{"get-stations", "create-booking", "create-booking-payment"}},
		{file: "parameters-style-3.0.json", tools: 21},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			a, err := Compile(b, Options{BaseURL: "https://api.example"})
			if err != nil {
				t.Fatal(err)
			}
			ts := tools(t, a)
			if len(ts) != tc.tools {
				t.Errorf("%d tools, want %d (warnings %v)", len(ts), tc.tools, a.Warnings())
			}
			for _, n := range tc.names {
				if ts[n] == nil {
					t.Errorf("no tool %q", n)
				}
			}
		})
	}
}

func FuzzCompile(f *testing.F) {
	f.Add([]byte(storeDoc))
	f.Add([]byte(`{"openapi":"3.0.0","info":{"title":"x","version":"1"},"servers":[{"url":"http://x"}],"paths":{"/a/{b}":{"get":{"operationId":"a","parameters":[{"name":"b","in":"path","required":true,"schema":{"$ref":"#/components/schemas/B"}}],"responses":{}}}},"components":{"schemas":{"B":{"allOf":[{"$ref":"#/components/schemas/B"}]}}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		if len(doc) > 64<<10 {
			return
		}
		a, err := Compile(doc, Options{BaseURL: "http://x"})
		if err != nil {
			return
		}
		for _, tl := range a.Tools() {
			if !json.Valid(tl) {
				t.Fatalf("invalid tool JSON: %s", tl)
			}
		}
	})
}
