package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"strings"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// MiddlewareOptions configure [Middleware].
type MiddlewareOptions struct {
	// ResourceMetadataURL is the URL of the gateway's protected resource
	// metadata ([MetadataURL]); every challenge carries it so that MCP
	// clients find the authorization servers (RFC 9728 §5.1).
	ResourceMetadataURL string
	// RequiredScopes must all be granted to every token
	// (auth.required_scopes). They are named in every challenge.
	RequiredScopes []string
	// KnownTenant reports whether a tenant id is configured. If nil, every
	// tenant is accepted.
	KnownTenant func(id string) bool
	// Logger, if nil, means no logging. Failures are logged at debug level
	// with their reason and at most the first bytes of the token's SHA-256;
	// never the token.
	Logger *slog.Logger
	// OnFailure, if not nil, is called with the reason of every refused
	// request: one of the Reason constants, a small set fit for a metric
	// label.
	OnFailure func(reason string)
}

// Middleware returns middleware that admits only requests bearing a valid
// access token, and puts the token's [Principal] into their context.
//
// The answers, by case (RFC 6750 §3 and §3.1, RFC 9728 §5.1, MCP
// 2025-11-25 basic/authorization "Error Handling"). Every challenge is
// Bearer with resource_metadata, plus scope when scopes are required:
//
//   - A token in the query (access_token) or a form-encoded body: 400,
//     error="invalid_request". RFC 6750 §2.2 and §2.3 allow them, but MCP
//     clients "MUST NOT" put tokens in the query and no MCP request is a
//     form, so the request is refused rather than the token ignored. The
//     body is never read.
//   - No Authorization header, or another scheme (Basic ...): 401 with no
//     error code, as RFC 6750 §3.1 asks when "the request lacks any
//     authentication information ... or attempted using an unsupported
//     authentication method".
//   - A Bearer header whose value is not exactly one token ("Bearer",
//     "Bearer a b", characters outside RFC 6750 §2.1 b64token): 401,
//     error="invalid_token". §3.1 would allow invalid_request with 400, but
//     invalid_token covers a "malformed" token too, and a 401 is what
//     makes an MCP client (re)authorize using the resource_metadata.
//   - A token that fails [Verifier.Verify]: 401, error="invalid_token",
//     error_description=[Reason].
//   - The token's issuer is unreachable: 503 and Retry-After, no challenge:
//     the token may be fine and the client should retry, not reauthorize.
//   - A valid token whose tenant KnownTenant refuses: 403,
//     error="insufficient_scope", error_description="tenant not
//     configured", without scope. No new token from the same grant would
//     help, but insufficient_scope (§3.1: "higher privileges than provided")
//     is the closest code, and 401 invalid_token would send clients into a
//     reauthorization loop.
//   - A valid token without every required scope: 403,
//     error="insufficient_scope", scope=the required scopes (MCP "Runtime
//     Insufficient Scope Errors"), as [InsufficientScope] writes it.
//
// Bodies are JSON-RPC error responses with a null id: code -32600 for 4xx,
// -32603 for 5xx. Nothing echoes the token.
func Middleware(v *Verifier, opts MiddlewareOptions) func(http.Handler) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &middleware{v: v, opts: opts, log: log}
	rm, scopes := opts.ResourceMetadataURL, opts.RequiredScopes
	m.missing = WWWAuthenticate(Challenge{ResourceMetadata: rm, Scopes: scopes})
	m.malformed = WWWAuthenticate(Challenge{ResourceMetadata: rm, Scopes: scopes,
		Error: "invalid_token", ErrorDescription: "malformed authorization header"})
	m.notInHeader = WWWAuthenticate(Challenge{ResourceMetadata: rm, Scopes: scopes,
		Error: "invalid_request", ErrorDescription: "tokens are accepted only in the Authorization header"})
	m.unknownTenant = WWWAuthenticate(Challenge{ResourceMetadata: rm,
		Error: "insufficient_scope", ErrorDescription: "tenant not configured"})
	m.insufficient = WWWAuthenticate(Challenge{ResourceMetadata: rm, Scopes: scopes,
		Error: "insufficient_scope", ErrorDescription: insufficientScopeDescription})
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.serve(w, r, next)
		})
	}
}

type middleware struct {
	v    *Verifier
	opts MiddlewareOptions
	log  *slog.Logger

	// Challenges that do not depend on the request.
	missing, malformed, notInHeader, unknownTenant, insufficient string
}

const insufficientScopeDescription = "missing required scope"

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	if tokenOutsideHeader(r) {
		m.fail(r, ReasonTokenNotInHeader, "", nil)
		writeError(w, http.StatusBadRequest, m.notInHeader, "Bad Request: tokens are accepted only in the Authorization header")
		return
	}
	token, ok := bearerToken(r.Header.Values("Authorization"))
	if token == "" {
		reason, challenge := ReasonMissingToken, m.missing
		if ok {
			reason, challenge = ReasonMalformedHeader, m.malformed
		}
		m.fail(r, reason, "", nil)
		writeError(w, http.StatusUnauthorized, challenge, "Unauthorized")
		return
	}
	p, err := m.v.Verify(r.Context(), token)
	if err != nil {
		reason := Reason(err)
		m.fail(r, reason, token, err)
		switch {
		case errors.Is(err, ErrInvalidToken):
			challenge := WWWAuthenticate(Challenge{ResourceMetadata: m.opts.ResourceMetadataURL, Scopes: m.opts.RequiredScopes,
				Error: "invalid_token", ErrorDescription: reason})
			writeError(w, http.StatusUnauthorized, challenge, "Unauthorized: "+reason)
		case errors.Is(err, ErrIssuerUnavailable):
			w.Header().Set("Retry-After", "5")
			writeError(w, http.StatusServiceUnavailable, "", "Service Unavailable: token issuer unavailable")
		default:
			writeError(w, http.StatusInternalServerError, "", "Internal error")
		}
		return
	}
	if m.opts.KnownTenant != nil && !m.opts.KnownTenant(p.Tenant) {
		m.fail(r, ReasonUnknownTenant, token, nil)
		writeError(w, http.StatusForbidden, m.unknownTenant, "Forbidden: tenant not configured")
		return
	}
	if !p.HasScopes(m.opts.RequiredScopes...) {
		m.fail(r, ReasonInsufficientScope, token, nil)
		writeError(w, http.StatusForbidden, m.insufficient, "Forbidden: insufficient scope")
		return
	}
	next.ServeHTTP(w, r.WithContext(withVerified(r.Context(), p, token)))
}

// fail reports a refused request to the hook and the log. token, if not
// empty, is logged as a short prefix of its SHA-256 only.
func (m *middleware) fail(r *http.Request, reason, token string, err error) {
	if m.opts.OnFailure != nil {
		m.opts.OnFailure(reason)
	}
	if !m.log.Enabled(r.Context(), slog.LevelDebug) {
		return
	}
	attrs := []slog.Attr{slog.String("reason", reason)}
	if token != "" {
		attrs = append(attrs, slog.String("token_sha256", tokenHashPrefix(token)))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	m.log.LogAttrs(r.Context(), slog.LevelDebug, "request refused", attrs...)
}

// tokenHashPrefix returns the first 8 hex digits of the token's SHA-256:
// enough to correlate log lines, useless to an attacker.
func tokenHashPrefix(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

// tokenOutsideHeader reports whether r carries or may carry a token
// somewhere other than the Authorization header: an access_token query
// parameter (RFC 6750 §2.3) or a form-encoded body (§2.2), which is not
// read.
func tokenOutsideHeader(r *http.Request) bool {
	if r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, "access_token") && r.URL.Query().Has("access_token") {
		return true
	}
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt == "application/x-www-form-urlencoded" {
			return true
		}
	}
	return false
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header (RFC 6750 §2.1; the scheme is case-insensitive, RFC 9110 §11.1).
// bearer reports whether the header used the Bearer scheme at all: with an
// empty token it tells a malformed Bearer value from a missing or foreign
// one. Several Authorization headers are malformed.
func bearerToken(values []string) (token string, bearer bool) {
	switch len(values) {
	case 0:
		return "", false
	case 1:
	default:
		return "", true
	}
	scheme, rest, _ := strings.Cut(values[0], " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimLeft(rest, " ")
	if !isB64Token(token) {
		return "", true
	}
	return token, true
}

// isB64Token reports whether s matches RFC 6750 §2.1's b64token:
// 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	s = strings.TrimRight(s, "=")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// A Challenge is a Bearer challenge for a WWW-Authenticate header (RFC 6750
// §3, RFC 9728 §5.1). Empty fields are left out.
type Challenge struct {
	// ResourceMetadata is the protected resource metadata URL.
	ResourceMetadata string
	// Scopes are the scopes the request needs, space-joined into scope.
	Scopes []string
	// Error is "invalid_request", "invalid_token" or "insufficient_scope".
	Error string
	// ErrorDescription is a short text for developers.
	ErrorDescription string
}

// WWWAuthenticate returns the WWW-Authenticate header value for c, such as
//
//	Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read", error="insufficient_scope"
func WWWAuthenticate(c Challenge) string {
	var b strings.Builder
	b.WriteString("Bearer")
	sep := " "
	param := func(name, value string) {
		if value == "" {
			return
		}
		b.WriteString(sep)
		b.WriteString(name)
		b.WriteString("=")
		writeQuoted(&b, value)
		sep = ", "
	}
	param("resource_metadata", c.ResourceMetadata)
	param("scope", strings.Join(c.Scopes, " "))
	param("error", c.Error)
	param("error_description", c.ErrorDescription)
	return b.String()
}

// writeQuoted writes s as an RFC 9110 §5.6.4 quoted-string. Control
// characters, which neither RFC 6750 nor a header line allows, become
// spaces.
func writeQuoted(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			b.WriteByte(' ')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// InsufficientScope answers a request whose token lacks scopes with 403
// and the challenge MCP asks for ("Runtime Insufficient Scope Errors"):
// error="insufficient_scope", scope=scopes, resource_metadata. scopes
// should be every scope the operation needs, not only the missing ones, so
// that the client keeps them when it asks for a new token. The body is a
// JSON-RPC error with a null id; nothing may have been written to w yet.
func InsufficientScope(w http.ResponseWriter, resourceMetadataURL string, scopes []string) {
	challenge := WWWAuthenticate(Challenge{ResourceMetadata: resourceMetadataURL, Scopes: scopes,
		Error: "insufficient_scope", ErrorDescription: insufficientScopeDescription})
	writeError(w, http.StatusForbidden, challenge, "Forbidden: insufficient scope")
}

// writeError writes an authentication failure: status, the challenge if
// any, and a JSON-RPC error with a null id.
func writeError(w http.ResponseWriter, status int, challenge, msg string) {
	h := w.Header()
	if challenge != "" {
		h.Set("WWW-Authenticate", challenge)
	}
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	code := int64(jsonrpc.CodeInvalidRequest)
	if status >= 500 {
		code = jsonrpc.CodeInternalError
	}
	w.WriteHeader(status)
	_, _ = w.Write(jsonrpc.AppendError(nil, jsonrpc.NullID, &jsonrpc.Error{Code: code, Message: msg}))
}
