package generation

import (
	"context"
	"log/slog"

	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/credentials"
	"github.com/mcpgw/gateway/internal/guard"
	"github.com/mcpgw/gateway/internal/identity"
	"github.com/mcpgw/gateway/internal/policy"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// signerFor returns the signer of cfg and the digest of its key files:
// prev's when nothing it was made from changed (see identity.ForConfig).
func signerFor(cfg *config.Config, prev *State, log *slog.Logger) (*identity.Signer, string, error) {
	var made identity.Made
	if prev != nil {
		made = identity.Made{Signer: prev.Signer, Config: prev.Cfg, KeysSum: prev.KeysSum}
	}
	made, err := identity.ForConfig(cfg, made, log)
	return made.Signer, made.KeysSum, err
}

// compilePolicy compiles cfg's policy rules (internal/policy,
// docs/policy.md). The source of the gateway's token for their decision
// point (policy.pdp.auth), if any, is returned for the State to own.
func compilePolicy(cfg *config.Config, sh *Shared) (*policy.Engine, credentials.Source, error) {
	m := sh.Metrics
	opts := policy.Options{
		OnPDP:      func(e policy.PDPEvent) { m.PDPRequest(e.Err != nil, e.Duration) },
		OnCacheHit: m.PDPCacheHit,
	}
	var src credentials.Source
	if p := cfg.Policy.PDP; p != nil && p.Auth != nil {
		// The gateway's own token: an upstream of no tenant, as far as
		// the credentials are concerned.
		src = credentials.ForUpstream(&config.Config{}, &config.Upstream{Name: "policy.pdp", URL: p.URL, Auth: p.Auth},
			credentials.Options{HTTPClient: sh.AuthClient, OnFetch: m.TokenFetch, Logger: sh.Log})
		opts.Token = src
	}
	e, err := policy.Compile(cfg, opts)
	if err != nil {
		if src != nil {
			src.Close()
		}
		return nil, nil, err
	}
	return e, src, nil
}

// compileGuards compiles cfg's content guards (internal/guard,
// docs/guards.md); the gateway's own secrets of each upstream are
// redacted from its results whatever is configured.
func compileGuards(cfg *config.Config, m *telemetry.Metrics) (*guard.Engine, error) {
	secrets := credentials.UpstreamSecrets(cfg)
	return guard.Compile(cfg, guard.Options{
		Secrets: func(upstream string) []string { return secrets[upstream] },
		OnFinding: func(in *guard.Input, f guard.Finding) {
			m.GuardFinding(in.Tenant, in.Upstream, f.Phase.String(), f.Kind, f.Action.String(), f.Count)
		},
		OnWebhook: func(e guard.WebhookEvent) { m.GuardWebhook(e.Err != nil, e.Duration) },
	})
}

// callerTenant returns the tenant of the caller ctx carries: a stdio
// upstream runs its processes per tenant (upstream.Options.Tenant).
func callerTenant(ctx context.Context) string { return credentials.From(ctx).Tenant }
