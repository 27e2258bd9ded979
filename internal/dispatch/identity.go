package dispatch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"reflect"

	"github.com/mcpgw/gateway/internal/auth"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/identity"
	"github.com/mcpgw/gateway/internal/session"
)

// Upstream identity: how a request reaches an upstream as its caller's
// tenant, or as its caller, when the upstream's credentials depend on them
// (see internal/credentials). The caller travels in the request's context;
// the credentials' partition keeps apart what each identity was shown.

// credentialSecrets are the secrets of upstream u's credentials beyond its
// own headers: the client secrets, and the tenants' header values, scrubbed
// from whatever the upstream answers (see upstream.Scrubber).
func credentialSecrets(u *config.Upstream, tenants map[string]config.TenantUpstream) []string {
	var out []string
	if u.Auth != nil {
		out = append(out, u.Auth.ClientSecret)
	}
	for _, tu := range tenants {
		for _, v := range tu.Headers {
			out = append(out, v)
		}
		for _, v := range tu.Env {
			out = append(out, v)
		}
		if tu.Auth != nil {
			out = append(out, tu.Auth.ClientSecret)
		}
	}
	return out
}

// usesSigner reports whether upstream u, for any tenant, uses signed
// identity.
func usesSigner(cfg *config.Config, u *config.Upstream) bool {
	if u.Auth != nil && u.Auth.Mode == config.AuthSignedIdentity {
		return true
	}
	for _, tu := range cfg.TenantCredentials(u.Name) {
		if a := config.EffectiveAuth(u, &tu); a != nil && a.Mode == config.AuthSignedIdentity {
			return true
		}
	}
	return false
}

// signerFor returns the signer of cfg: prev's when the identity settings
// and the public URL are the same, nil when no upstream signs.
//
// It fails when the key files cannot be used (config.Validate cannot load
// them): a config that cannot be served is not.
func (h *Server) signerFor(cfg *config.Config, prev *State) (*identity.Signer, string, error) {
	need := false
	for i := range cfg.Upstreams {
		need = need || usesSigner(cfg, &cfg.Upstreams[i])
	}
	if !need {
		return nil, "", nil
	}
	// Key files rotated in place (the same paths) make a new signer too.
	sum := keyFilesSum(cfg.Identity.SigningKeys)
	if prev != nil && prev.signer != nil && reflect.DeepEqual(prev.cfg.Identity, cfg.Identity) &&
		prev.cfg.Server.PublicURL == cfg.Server.PublicURL && prev.keysSum == sum {
		return prev.signer, sum, nil
	}
	s, err := identity.NewSigner(identity.Options{
		Issuer: cfg.Server.PublicURL, KeyFiles: cfg.Identity.SigningKeys, TTL: cfg.Identity.TokenTTL.D(), Logger: h.log,
	})
	if err != nil {
		return nil, "", fmt.Errorf("identity: %w", err)
	}
	return s, sum, nil
}

// keyFilesSum is a digest of the contents of key files ("" for none, or
// for a file that cannot be read: NewSigner reports that).
func keyFilesSum(files []string) string {
	if len(files) == 0 {
		return ""
	}
	h := sha256.New()
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return ""
		}
		h.Write(b)
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// JWKS serves the public keys of the signed-identity tokens of the config
// in force at /.well-known/jwks.json: an empty set when no upstream uses
// them.
func (h *Server) JWKS() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := h.state.Load().signer; s != nil {
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
		rq.who = &credentials.Caller{
			Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant, Scopes: p.Scopes,
			Token: credentials.NewSecret(auth.TokenFrom(ctx)),
		}
	}
	return rq.who
}

// withCaller returns ctx carrying rq's caller, when some upstream's
// credentials depend on it.
func (rq *Request) withCaller(ctx context.Context) context.Context {
	if !rq.st.creds {
		return ctx
	}
	return credentials.With(ctx, rq.identityOf(ctx))
}

// partition names the identity rq reaches up with ("" when every caller
// reaches it as the same one).
func (rq *Request) partition(up *upstreamRef) string {
	if up.creds == nil {
		return ""
	}
	who := rq.who
	if who == nil {
		p := rq.principal
		who = &credentials.Caller{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant}
	}
	return up.creds.Partition(who)
}

// mode is how rq reaches up, for the audit log: "" for static headers.
func (rq *Request) mode(up *upstreamRef) string {
	if up == nil || up.creds == nil || rq.who == nil {
		return ""
	}
	if m := up.creds.Mode(rq.who); m != credentials.ModeStatic {
		return m
	}
	return ""
}

// recordCaller returns ctx carrying the caller a session record belongs to
// (without a token: token exchange cannot act for it), for the gateway's
// own requests on the record's upstream sessions (terminating them).
func recordCaller(ctx context.Context, st *State, p session.Principal) context.Context {
	if !st.creds {
		return ctx
	}
	return credentials.With(ctx, &credentials.Caller{Issuer: p.Issuer, Subject: p.Subject, Tenant: p.Tenant})
}

// callerTenant returns the tenant of the caller ctx carries: a stdio
// upstream runs its processes per tenant (upstream.Options.Tenant).
func callerTenant(ctx context.Context) string { return credentials.From(ctx).Tenant }
