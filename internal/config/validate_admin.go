package config

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
)

func (v *validator) admin(c *Config) {
	a := c.Admin.Console.Auth
	if a == nil {
		return
	}
	const path = "admin.console.auth.bearer"
	switch {
	case a.OIDC != nil && a.Bearer != "":
		v.addf("admin.console.auth", "set bearer or oidc, not both")
	case a.OIDC != nil:
		v.consoleOIDC("admin.console.auth.oidc", a.OIDC)
	case a.Bearer == "":
		v.addf(path, "is required with admin.console.auth, unless oidc is set (a secret of at least %d characters; typically ${VAR})", MinConsoleBearer)
	case len(a.Bearer) < MinConsoleBearer:
		// The value is a secret: its length only is told.
		v.addf(path, "must be at least %d characters, got %d (generate one with: openssl rand -hex 16)", MinConsoleBearer, len(a.Bearer))
	}
	if _, ok := v.pos["admin.console.auth"]; ok && c.Server.AdminListen == "" {
		v.warnf("admin.console.auth", "is ignored: server.admin_listen is not set")
	}
}

// consoleOIDC checks the console's OpenID Connect sign-in.
func (v *validator) consoleOIDC(path string, o *ConsoleOIDC) {
	if o.Issuer == "" {
		v.addf(path+".issuer", "is required")
	} else {
		v.authURL(path+".issuer", o.Issuer, true)
	}
	if o.ClientID == "" {
		v.addf(path+".client_id", "is required")
	}
	switch u, err := url.Parse(o.RedirectURL); {
	case o.RedirectURL == "":
		v.addf(path+".redirect_url", "is required: the console's callback as the browser reaches it, https://<admin host>%s", ConsoleCallbackPath)
	case !v.authURL(path+".redirect_url", o.RedirectURL, true):
		// Reported.
	case err != nil || u.Path != ConsoleCallbackPath:
		v.addf(path+".redirect_url", "must end in %s, where the console takes the provider's answer", ConsoleCallbackPath)
	}
	v.scopes(path+".scopes", o.Scopes)
	if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
		v.addf(path+".scopes", "must include openid")
	}
	if len(o.Subjects) == 0 && len(o.Groups) == 0 {
		v.addf(path, "needs subjects or groups: who may read the console")
	}
	for i, s := range o.Subjects {
		if s == "" {
			v.addf(fmt.Sprintf("%s.subjects[%d]", path, i), "must not be empty")
		}
	}
	for i, g := range o.Groups {
		if g == "" {
			v.addf(fmt.Sprintf("%s.groups[%d]", path, i), "must not be empty")
		}
	}
	switch {
	case len(o.Groups) > 0 && o.GroupsClaim == "":
		v.addf(path+".groups_claim", "is required with groups: the ID token claim that lists the reader's groups")
	case o.GroupsClaim != "" && len(o.Groups) == 0:
		v.addf(path+".groups", "is required with groups_claim: the groups allowed in")
	case o.GroupsClaim != "" && !validClaimPath(o.GroupsClaim):
		v.addf(path+".groups_claim", "must be a claim name, or names joined by single dots")
	}
}

// LoopbackAddr reports whether the host of addr (host:port) is a loopback
// address or "localhost": a listener there is reachable from this host
// only. An empty host (":9090") listens on every interface: false.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return LoopbackHost(host)
}

// LoopbackHost reports whether host (no port; an IPv6 address with or
// without brackets) is "localhost" or a loopback IP address.
func LoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
