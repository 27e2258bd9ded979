package credentials

import "github.com/mcpgw/gateway/internal/config"

// SecretsOf are the secrets of upstream u's credentials beyond its own
// headers: the client secrets, and the tenants' header and env values,
// scrubbed from whatever the upstream answers (see upstream.Scrubber).
func SecretsOf(u *config.Upstream, tenants map[string]config.TenantUpstream) []string {
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

// UpstreamSecrets returns, per upstream of cfg, every secret the gateway
// holds for it: its own headers and env, then SecretsOf.
func UpstreamSecrets(cfg *config.Config) map[string][]string {
	secrets := make(map[string][]string, len(cfg.Upstreams))
	for i := range cfg.Upstreams {
		u := &cfg.Upstreams[i]
		var s []string
		for _, v := range u.Headers {
			s = append(s, v)
		}
		for _, v := range u.Env {
			s = append(s, v)
		}
		secrets[u.Name] = append(s, SecretsOf(u, cfg.TenantCredentials(u.Name))...)
	}
	return secrets
}
