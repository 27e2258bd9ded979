// Package testkit holds the real parts the gateway's integration tests
// share, so that each test does not start its own processes its own way:
//
//   - [Upstream]: a go-sdk MCP server behind httptest, with tools that echo,
//     stream progress, block, and report the headers and _meta they received.
//   - [RawUpstream]: a hand-written Streamable HTTP server that answers with
//     fields no SDK knows about, to check byte-level pass-through.
//   - [Connect]: a go-sdk client session to any MCP endpoint.
//   - [HostileClient]: a raw-HTTP client that misbehaves on purpose (slow
//     bodies after a large Content-Length, initializes by the hundred, huge
//     batches, streams held open, arbitrary JSON-RPC bytes).
//   - [BuildGateway] and [StartGateway]: the built binary, run as a child
//     process.
//   - [WriteFile] and [FreePort]: config files and ports for that process.
//   - [StartIDP]: a real OpenID provider (node, oidc-provider) issuing JWT
//     access tokens through the client_credentials grant, and through token
//     exchange (RFC 8693) for the clients allowed to; it counts what it
//     issued.
//   - [AuthUpstream]: a go-sdk MCP server behind the SDK's bearer token
//     middleware, accepting JWTs of a JWKS (an IDP's) or static keys, whose
//     whoami tool tells which identity a call's token stood for.
//   - [GuardHook]: a content-guard webhook (docs/guards.md) that checks the
//     gateway's envelope and answers allow, block or replace, or fails,
//     holds or answers outside the contract on purpose.
//   - [StartPetStore]: a REST API described by a real OpenAPI 3.1 document
//     (served by it), for openapi upstreams: pets in memory, an operation
//     behind a JWT, one behind an API key, one that echoes its parameters
//     as received, a failing one and one answering plain text; it
//     remembers the requests it received.
//   - [RunTSClient]: the official TypeScript MCP SDK client, run by node.
//   - [NodeDir]: the Node scripts behind those two, in node/, with their
//     npm dependencies installed (npm ci, once). Tests that use them need
//     node (>= 20) and npm, and fail without them.
//
// Everything a helper starts listens on 127.0.0.1 and is stopped by the
// test's Cleanup; processes are stopped by their PID.
//
// The package is for tests only: nothing outside _test.go files may import it.
package testkit
