package config

import (
	"net"
	"strings"
)

func (v *validator) admin(c *Config) {
	a := c.Admin.Console.Auth
	if a == nil {
		return
	}
	const path = "admin.console.auth.bearer"
	switch {
	case a.Bearer == "":
		v.addf(path, "is required with admin.console.auth (a secret of at least %d characters; typically ${VAR})", MinConsoleBearer)
	case len(a.Bearer) < MinConsoleBearer:
		// The value is a secret: its length only is told.
		v.addf(path, "must be at least %d characters, got %d (generate one with: openssl rand -hex 16)", MinConsoleBearer, len(a.Bearer))
	}
	if _, ok := v.pos["admin.console.auth"]; ok && c.Server.AdminListen == "" {
		v.warnf("admin.console.auth", "is ignored: server.admin_listen is not set")
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
