package config

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

var vaultKeyIDRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// VaultKeyBytes decodes a vault key's secret: 32 bytes, base64 in the
// standard or URL alphabet, padded or not.
func VaultKeyBytes(secret string) ([]byte, error) {
	s := strings.TrimRight(strings.TrimSpace(secret), "=")
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != 32 {
				return nil, fmt.Errorf("decodes to %d bytes, not 32", len(b))
			}
			return b, nil
		}
	}
	return nil, errors.New("is not base64")
}

// UsesUserOAuth reports whether an upstream, for any tenant, uses auth
// mode user_oauth.
func (c *Config) UsesUserOAuth() bool {
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		if u.Auth != nil && u.Auth.Mode == AuthUserOAuth {
			return true
		}
		for j := range c.Tenants {
			if a := EffectiveAuth(u, c.Tenants[j].TenantUpstream(u.Name)); a != nil && a.Mode == AuthUserOAuth {
				return true
			}
		}
	}
	return false
}

// vault checks the vault's keys (required when some upstream uses
// user_oauth) and bounds. No problem quotes a secret.
func (v *validator) vault(c *Config) {
	vt := &c.Vault
	if len(vt.Keys) == 0 && c.UsesUserOAuth() {
		at := "vault.keys"
		for i := range c.Upstreams {
			if a := c.Upstreams[i].Auth; a != nil && a.Mode == AuthUserOAuth {
				at = fmt.Sprintf("upstreams[%d].auth.mode", i)
				break
			}
		}
		v.addf(at, "mode %s needs vault.keys: at least one key is required", AuthUserOAuth)
	}
	seen := make(map[string]bool)
	for i, k := range vt.Keys {
		p := fmt.Sprintf("vault.keys[%d]", i)
		switch {
		case !vaultKeyIDRE.MatchString(k.ID):
			v.addf(p+".id", "must be 1 to 32 letters, digits, '-' or '_'")
		case seen[k.ID]:
			v.addf(p+".id", "key id %q is listed twice", k.ID)
		}
		seen[k.ID] = true
		if _, err := VaultKeyBytes(k.Secret); err != nil {
			v.addf(p+".secret", "must be 32 bytes, base64-encoded: it %v", err)
		}
	}
	if d := vt.ConsentTTL.D(); d < 0 || d > 0 && (d < time.Second || d > time.Hour) {
		v.addf("vault.consent_ttl", "must be from 1s to 1h")
	}
	if l := vt.Login; l != nil {
		switch {
		case l.Issuer == "":
			v.addf("vault.login.issuer", "is required")
		case !slices.ContainsFunc(c.Auth.Issuers, func(i Issuer) bool { return strings.TrimSuffix(i.IssuerURL, "/") == strings.TrimSuffix(l.Issuer, "/") }):
			v.addf("vault.login.issuer", "must be the issuer_url of one of auth.issuers")
		}
		if l.ClientID == "" {
			v.addf("vault.login.client_id", "is required")
		}
		v.scopes("vault.login.scopes", l.Scopes)
	}
	nonNegative(v, "vault.pending_per_principal", vt.PendingPerPrincipal)
	nonNegative(v, "vault.pending", vt.Pending)
	nonNegative(v, "vault.pending_per_tenant", vt.PendingPerTenant)
	nonNegative(v, "vault.tokens_per_tenant", vt.TokensPerTenant)
	nonNegative(v, "vault.tokens", vt.Tokens)
	for i, iss := range vt.DiscoveredIssuers {
		p := fmt.Sprintf("vault.discovered_issuers[%d]", i)
		v.httpURL(p, iss)
		if u, err := url.Parse(iss); err == nil && (u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(iss, "#")) {
			v.addf(p, "must be an issuer identifier, without query or fragment (RFC 8414 §2)")
		}
	}
	if len(vt.DiscoveredIssuers) == 0 {
		v.openDiscovery(c)
	}
}

// openDiscovery warns of each upstream that finds its authorization server
// by discovery (user_oauth without issuer) while vault.discovered_issuers
// does not restrict what discovery may find. One with a client secret was
// warned of already (upstreamAuth).
func (v *validator) openDiscovery(c *Config) {
	discovers := func(a *UpstreamAuth) bool { return a != nil && a.Mode == AuthUserOAuth && a.Issuer == "" }
	for i := range c.Upstreams {
		u := &c.Upstreams[i]
		open, secret := discovers(u.Auth), discovers(u.Auth) && u.Auth.ClientSecret != ""
		for j := range c.Tenants {
			if a := EffectiveAuth(u, c.Tenants[j].TenantUpstream(u.Name)); discovers(a) {
				open, secret = true, secret || a.ClientSecret != ""
			}
		}
		if secret {
			continue
		}
		if open {
			v.warnf(fmt.Sprintf("upstreams[%d].auth.issuer", i), "is not set and vault.discovered_issuers is empty: "+
				"the upstream's metadata chooses the authorization server (any https issuer on a public address); set issuer, or list the accepted ones in vault.discovered_issuers")
		}
	}
}
