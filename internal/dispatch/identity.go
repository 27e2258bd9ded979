package dispatch

import (
	"context"
	"net/http"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/session"
)

// Upstream identity: how a request reaches an upstream as its caller's
// tenant, or as its caller, when the upstream's credentials depend on them
// (see internal/credentials). The caller travels in the request's context;
// the credentials' partition keeps apart what each identity was shown.

// JWKS serves the public keys of the signed-identity tokens of the config
// in force at /.well-known/jwks.json: an empty set when no upstream uses
// them.
func (h *Server) JWKS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := h.state.Load().Signer; s != nil {
			s.Handler().ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"keys":[]}`))
	})
}

// identityOf returns whom rq's upstream requests are made for.
func (rq *Request) identityOf(ctx context.Context) *credentials.Caller {
	if rq.who == nil {
		p := rq.principal
		rq.who = credentials.NewCaller(p.Issuer, p.Subject, p.Tenant, p.Scopes, auth.TokenFrom(ctx))
	}
	return rq.who
}

// withCaller returns ctx carrying rq's caller, when some upstream's
// credentials depend on it.
func (rq *Request) withCaller(ctx context.Context) context.Context {
	return credentials.Carry(ctx, rq.st.PerRequest, func() *credentials.Caller { return rq.identityOf(ctx) })
}

// partition names the identity rq reaches up with ("" when every caller
// reaches it as the same one).
func (rq *Request) partition(up *upstreamRef) string {
	p := rq.principal
	return credentials.PartitionOf(up.Creds, rq.who, p.Issuer, p.Subject, p.Tenant)
}

// mode is how rq reaches up, for the audit log: "" for static headers.
func (rq *Request) mode(up *upstreamRef) string {
	if up == nil {
		return ""
	}
	return credentials.AuditMode(up.Creds, rq.who)
}

// recordCaller returns ctx carrying the caller a session record belongs to
// (without a token: token exchange cannot act for it), for the gateway's
// own requests on the record's upstream sessions (terminating them).
func recordCaller(ctx context.Context, st *State, p session.Principal) context.Context {
	return credentials.Carry(ctx, st.PerRequest, func() *credentials.Caller {
		return credentials.NewCaller(p.Issuer, p.Subject, p.Tenant, nil, "")
	})
}
