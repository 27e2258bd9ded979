package echoserver

import (
	"encoding/json"
	"io"
	"net/http"
)

// RESTPath is where [NewHandler] serves the REST echo API: its OpenAPI
// document at RESTPath+"/openapi.json" and its one operation, echo
// (POST RESTPath+"/echo", a JSON body {"text": ...} answered with the
// text as text/plain), for the gateway's openapi upstreams.
const RESTPath = "/rest"

// restDocument describes the REST echo API. Its server is relative, so
// that it resolves against wherever the document is fetched from.
const restDocument = `{
  "openapi": "3.1.0",
  "info": {"title": "bench echo", "version": "1.0.0"},
  "servers": [{"url": "` + RESTPath + `"}],
  "paths": {
    "/echo": {
      "post": {
        "operationId": "echo",
        "summary": "Returns the given text, unchanged.",
        "requestBody": {
          "required": true,
          "content": {"application/json": {"schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The text to return."}},
            "required": ["text"]
          }}}
        },
        "responses": {
          "200": {"description": "The text.", "content": {"text/plain": {"schema": {"type": "string"}}}}
        }
      }
    }
  }
}
`

// maxRESTBody bounds the body of a REST echo.
const maxRESTBody = 4 << 20

// serveRESTDocument serves restDocument.
func serveRESTDocument(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, restDocument)
}

// restEcho answers a JSON body {"text": ...} with the text, as the echo
// tool does: one small unmarshal.
func restEcho(w http.ResponseWriter, r *http.Request) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRESTBody+1))
	if err != nil || len(b) > maxRESTBody {
		http.Error(w, "body unreadable or too large", http.StatusBadRequest)
		return
	}
	var args struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(b, &args); err != nil {
		http.Error(w, "bad body: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, args.Text)
}
