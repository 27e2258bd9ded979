// Package config loads, expands and validates the gateway's YAML
// configuration.
//
// A Config is one immutable value: the gateway swaps a whole new one in on
// reload and each request keeps the snapshot it started with. Decoding is
// strict (unknown keys, wrong types and duplicates are errors) and every
// problem is reported at once with its file and line.
package config

import (
	"fmt"
	"time"
)

// Config is the whole gateway configuration.
type Config struct {
	Server    Server     `yaml:"server"`
	Sessions  Sessions   `yaml:"sessions"`
	Upstreams []Upstream `yaml:"upstreams"`

	// Path is the file the config was loaded from ("" when built in code).
	Path string `yaml:"-"`
}

// Upstream returns the upstream named name, or nil if there is none.
func (c *Config) Upstream(name string) *Upstream {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// Server configures the client-facing listener.
type Server struct {
	// Listen is the address of the MCP listener. Default ":8080".
	Listen string `yaml:"listen"`
	// PublicURL is this gateway's MCP endpoint as clients reach it; it is the
	// resource identifier for OAuth and the origin accepted by default.
	PublicURL string `yaml:"public_url"`
	// AllowedOrigins are Origin header values accepted besides none and the
	// origin of PublicURL.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// AdminListen is the address of /metrics, /healthz, /readyz. Empty: off.
	AdminListen string `yaml:"admin_listen"`
	// MaxBodyBytes bounds a POST body. Default 4 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// RequestTimeout bounds one client request end to end, including a
	// streamed response. Default 5m.
	RequestTimeout Duration `yaml:"request_timeout"`
	// ReadHeaderTimeout bounds reading request headers. Default 10s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ListCacheTTL is how long an upstream's tool, prompt and resource lists
	// are served from the gateway's cache. Default 1m.
	ListCacheTTL Duration `yaml:"list_cache_ttl"`
}

// Sessions configures the session store.
type Sessions struct {
	// Store is "memory" (default) or "redis".
	Store string `yaml:"store"`
	// IdleTTL expires a session unused for this long. Default 30m.
	IdleTTL Duration `yaml:"idle_ttl"`
	// MaxSessions bounds the memory store. Default 100000.
	MaxSessions int `yaml:"max_sessions"`
}

// Upstream is one upstream MCP server.
type Upstream struct {
	// Name matches [a-z0-9-]+ and is unique.
	Name string `yaml:"name"`
	// URL is the upstream's Streamable HTTP endpoint (http or https).
	URL string `yaml:"url"`
	// Prefix namespaces the upstream's names and URIs. nil means "use Name";
	// a pointer to "" means no namespace.
	Prefix *string `yaml:"prefix"`
	// Timeout bounds each request to this upstream. Default 30s.
	Timeout Duration `yaml:"timeout"`
	// Headers are sent on every request to this upstream, after ${ENV}
	// expansion. They are secrets: never logged or printed.
	Headers map[string]string `yaml:"headers"`
}

// EffectivePrefix returns the namespace prefix: the configured one, or the
// name when none is configured.
func (u *Upstream) EffectivePrefix() string {
	if u.Prefix != nil {
		return *u.Prefix
	}
	return u.Name
}

// Duration is a time.Duration written in YAML as a Go duration string
// ("30s", "1m30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns d in time.Duration's format, such as "1m30s".
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText encodes d as a Go duration string, so that YAML and JSON
// output reads "30s" rather than a count of nanoseconds.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText decodes a Go duration string such as "30s".
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("invalid duration: %w", err)
	}
	*d = Duration(v)
	return nil
}
