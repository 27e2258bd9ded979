// Package auth authenticates the callers of the MCP endpoint and puts who
// they are into the request context.
//
// Everything below the auth middleware asks [PrincipalFrom] and never looks
// at credentials itself. Until an issuer is configured the gateway runs with
// [Anonymous], which marks every request as coming from one anonymous
// principal of a fixed tenant.
//
// # Resource server
//
// With issuers configured, the gateway is an OAuth 2.1 resource server (MCP
// 2025-11-25 and 2026-07-28 basic/authorization) that accepts JWT access
// tokens:
//
//	request ──► Middleware ──► Verifier.Verify ──► token cache (SHA-256 → Principal)
//	              │                 │ miss
//	              │                 ▼
//	              │            issuer by unverified iss ── alg allowlist (no none, no HS*)
//	              │                 │
//	              │                 ▼
//	              │            go-oidc IDTokenVerifier ── keySet ── RemoteKeySet ── keyFetcher ──► IdP JWKS
//	              │                 │                                              (≤ 1 fetch / 10s)
//	              │                 ▼
//	              │            golang-jwt Validator: iss, aud, exp, nbf, iat with leeway
//	              │                 ▼
//	              │            Principal: sub, tenant, scopes, client id
//	              ▼
//	         tenant known? required scopes? ──► WithPrincipal ──► next
//
// [Verifier] discovers each issuer lazily, on its first token, and retries
// failed discoveries with backoff, so that the gateway starts while an IdP
// is down; [Verifier.Ready] reports which issuers cannot check tokens.
// [Middleware] maps the outcome to HTTP (401, 403, 400, 503) with RFC 6750
// challenges that point to the protected resource metadata that
// [MetadataHandler] serves (RFC 9728). [DevIssuer] is a throwaway IdP for
// `gateway demo`.
package auth
