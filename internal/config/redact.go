package config

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces secrets (header values, the Redis password) wherever
// they would be printed.
const redacted = "REDACTED"

// String describes u for humans with its header values redacted. fmt uses
// it for %v and %s, including when u is inside a Config.
func (u Upstream) String() string {
	prefix := "<name>"
	if u.Prefix != nil {
		prefix = fmt.Sprintf("%q", *u.Prefix)
	}
	var hs []string
	for _, name := range slices.Sorted(maps.Keys(u.Headers)) {
		hs = append(hs, name+": "+redacted)
	}
	var es []string
	for _, name := range slices.Sorted(maps.Keys(u.Env)) {
		es = append(es, name+": "+redacted)
	}
	return fmt.Sprintf("{name: %s, url: %s, transport: %s, command: %q, prefix: %s, timeout: %s, headers: {%s}, env: {%s}}",
		u.Name, redactURL(u.URL), u.Transport, u.Command, prefix, u.Timeout, strings.Join(hs, ", "), strings.Join(es, ", "))
}

// GoString is like String; it keeps %#v from printing header values.
func (u Upstream) GoString() string { return "config.Upstream" + u.String() }

// LogValue logs u's name, URL, prefix, timeout and header names, never its
// header values.
func (u Upstream) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("name", u.Name),
		slog.String("url", redactURL(u.URL)),
		slog.String("prefix", u.EffectivePrefix()),
		slog.Duration("timeout", u.Timeout.D()),
		slog.Any("header_names", slices.Sorted(maps.Keys(u.Headers))),
		slog.Any("env_names", slices.Sorted(maps.Keys(u.Env))),
	)
}

// MarshalJSON encodes u with its header values redacted, so that a logger
// that falls back to encoding/json (slog's JSONHandler given a Config)
// cannot print them either.
func (u Upstream) MarshalJSON() ([]byte, error) {
	type plain Upstream // without methods, so no recursion
	p := plain(u)
	p.URL = redactURL(u.URL)
	p.Headers = redactValues(u.Headers)
	p.Env = redactValues(u.Env)
	return json.Marshal(p)
}

// String describes r for humans with its password redacted. fmt uses it
// for %v and %s, including when r is inside a Config.
func (r Redis) String() string {
	password := `""`
	if r.Password != "" {
		password = redacted
	}
	return fmt.Sprintf("{addrs: [%s], master_name: %q, username: %q, password: %s, db: %d, tls: %t, key_prefix: %q, timeout: %s}",
		strings.Join(r.Addrs, " "), r.MasterName, r.Username, password, r.DB, r.TLS, r.KeyPrefix, r.Timeout)
}

// GoString is like String; it keeps %#v from printing the password.
func (r Redis) GoString() string { return "config.Redis" + r.String() }

// LogValue logs r's settings, and whether a password is set instead of
// the password.
func (r Redis) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Any("addrs", r.Addrs),
		slog.String("master_name", r.MasterName),
		slog.String("username", r.Username),
		slog.Bool("password_set", r.Password != ""),
		slog.Int("db", r.DB),
		slog.Bool("tls", r.TLS),
		slog.String("key_prefix", r.KeyPrefix),
		slog.Duration("timeout", r.Timeout.D()),
	)
}

// MarshalJSON encodes r with its password redacted; see
// [Upstream.MarshalJSON].
func (r Redis) MarshalJSON() ([]byte, error) {
	type plain Redis // without methods, so no recursion
	p := plain(r)
	p.Password = redactSecret(r.Password)
	return json.Marshal(p)
}

// redactSecret hides a secret, showing only whether it is set.
func redactSecret(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

// redactURL hides the user info of a URL built in code (a parsed config
// never has any): a bare user name may be a token, as in
// https://TOKEN@host/.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<invalid URL>"
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	return u.String()
}

// String describes a with its client secret redacted. fmt uses it for %v
// and %s, including when a is inside a Config.
func (a UpstreamAuth) String() string {
	return fmt.Sprintf("{mode: %s, token_url: %s, issuer: %s, client_id: %q, client_secret: %s, scopes: %v, resource: %s, audience: %q, header: %q}",
		a.Mode, redactURL(a.TokenURL), redactURL(a.Issuer), a.ClientID, redactSecret(a.ClientSecret), a.Scopes, a.Resource, a.Audience, a.Header)
}

// GoString is like String; it keeps %#v from printing the secret.
func (a UpstreamAuth) GoString() string { return "config.UpstreamAuth" + a.String() }

// LogValue logs a's settings, and whether a client secret is set instead
// of the secret.
func (a UpstreamAuth) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("mode", a.Mode),
		slog.String("token_url", redactURL(a.TokenURL)),
		slog.String("issuer", redactURL(a.Issuer)),
		slog.String("client_id", a.ClientID),
		slog.Bool("client_secret_set", a.ClientSecret != ""),
	)
}

// MarshalJSON encodes a with its client secret redacted; see
// [Upstream.MarshalJSON].
func (a UpstreamAuth) MarshalJSON() ([]byte, error) {
	type plain UpstreamAuth
	p := plain(a)
	p.ClientSecret = redactSecret(a.ClientSecret)
	return json.Marshal(p)
}

// String describes t with its header values redacted.
func (t TenantUpstream) String() string {
	var hs []string
	for _, name := range slices.Sorted(maps.Keys(t.Headers)) {
		hs = append(hs, name+": "+redacted)
	}
	auth := "none"
	if t.Auth != nil {
		auth = t.Auth.String()
	}
	for _, name := range slices.Sorted(maps.Keys(t.Env)) {
		hs = append(hs, "env "+name+": "+redacted)
	}
	return fmt.Sprintf("{name: %s, tools: %v, prompts: %v, resources: %v, headers: {%s}, auth: %s}",
		t.Name, t.Tools, t.Prompts, t.Resources, strings.Join(hs, ", "), auth)
}

// GoString is like String; it keeps %#v from printing header values.
func (t TenantUpstream) GoString() string { return "config.TenantUpstream" + t.String() }

// MarshalJSON encodes t with its header values redacted.
func (t TenantUpstream) MarshalJSON() ([]byte, error) {
	type plain TenantUpstream
	p := plain(t)
	p.Headers = redactValues(t.Headers)
	p.Env = redactValues(t.Env)
	return json.Marshal(p)
}

// redactValues returns m with every value redacted (nil for nil).
func redactValues(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for name := range m {
		out[name] = redacted
	}
	return out
}

// String describes a with its bearer and client secret redacted. fmt
// uses it for %v and %+v.
func (a ConsoleAuth) String() string {
	b := "none"
	if a.Bearer != "" {
		b = redacted
	}
	if a.OIDC == nil {
		return "{bearer: " + b + "}"
	}
	o := a.OIDC
	return fmt.Sprintf("{bearer: %s, oidc: {issuer: %s, client_id: %s, client_secret: %s, redirect_url: %s, scopes: %v, subjects: %v, groups_claim: %s, groups: %v}}",
		b, redactURL(o.Issuer), o.ClientID, redactSecret(o.ClientSecret), redactURL(o.RedirectURL), o.Scopes, o.Subjects, o.GroupsClaim, o.Groups)
}

// GoString is String, for %#v.
func (a ConsoleAuth) GoString() string { return "config.ConsoleAuth" + a.String() }

// LogValue logs a with its bearer and client secret redacted.
func (a ConsoleAuth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// MarshalJSON encodes a with its bearer and client secret redacted.
func (a ConsoleAuth) MarshalJSON() ([]byte, error) {
	type oidc ConsoleOIDC // without methods
	out := struct {
		Bearer string `json:"bearer"`
		OIDC   *oidc  `json:"oidc,omitempty"`
	}{Bearer: redactSecret(a.Bearer)}
	if a.OIDC != nil {
		o := oidc(*a.OIDC)
		o.ClientSecret = redactSecret(o.ClientSecret)
		out.OIDC = &o
	}
	return json.Marshal(out)
}

// MarshalJSON encodes k with its secret redacted.
func (k VaultKey) MarshalJSON() ([]byte, error) {
	type plain VaultKey
	p := plain(k)
	p.Secret = redactSecret(k.Secret)
	return json.Marshal(p)
}

// MarshalJSON encodes l with its client secret redacted.
func (l VaultLogin) MarshalJSON() ([]byte, error) {
	type plain VaultLogin
	p := plain(l)
	p.ClientSecret = redactSecret(l.ClientSecret)
	return json.Marshal(p)
}
