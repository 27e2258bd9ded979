// Package openapi serves a REST API described by an OpenAPI 3.0 or 3.1
// document as an MCP server: each operation is a tool, and a tools/call is
// one HTTP request to the API.
//
// [Compile] reads the document (JSON or YAML) with getkin/kin-openapi,
// which models both revisions and the JSON Schema 2020-12 keywords of 3.1,
// resolves references within the document and refuses those to others
// (chosen over pb33f/libopenapi, which reads both too, for its smaller
// dependency graph), and maps each selected operation to a tool:
//
//   - name: the operationId, with every character outside A-Z a-z 0-9 _ - .
//     replaced by _ and cut to 128 bytes (2025-11-25 server/tools, "Tool
//     Names"); an operation without one, selected explicitly, is named from
//     its method and path. Two operations with one name are an error.
//   - inputSchema: an object with one property per path, query, header and
//     cookie parameter, and "body" for a JSON request body. Local $refs are
//     expanded in place, within a bound on the nodes and bytes expanded; a
//     reference to a schema it is already inside of becomes {} (any value),
//     with a warning. OpenAPI 3.0's nullable becomes a type union with
//     null, and the keywords JSON Schema does not have are dropped.
//   - outputSchema: the JSON schema of the first 2xx response, when it is
//     an object schema (MCP asks for one).
//   - annotations, hints only: GET and HEAD read-only and idempotent, PUT
//     idempotent, DELETE destructive and idempotent; all open-world.
//
// [API.Transport] is the in-process endpoint: it answers server/discover as
// a 2026-07-28 server without sessions (and initialize, for a client that
// asks), tools/list from the compiled tools, and tools/call by sending the
// request. Path parameters are escaped as one segment each; query
// parameters follow the styles form (explode or not), spaceDelimited,
// pipeDelimited and deepObject; header parameters simple; cookies form. The
// request carries the headers of the MCP request that asked for it, but
// for the protocol's own: those are the credentials the gateway chose for
// the caller. A 2xx JSON answer is the result's text, and its
// structuredContent when the tool has an outputSchema; any other status is
// a result with isError and a bounded excerpt of the body.
//
// Not supported: path styles label and matrix (the operation is skipped,
// with a warning), request bodies that are not JSON (left out, with a
// warning; the operation is skipped when the body is required), external
// $refs, callbacks and links.
package openapi
