package check

import (
	"bytes"
	"fmt"
	"maps"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// ServerConfig is the part of a gateway config that other deployment files
// must agree with (ports, host names). It is read leniently: `gateway
// validate` is the strict check.
type ServerConfig struct {
	Listen      string
	AdminListen string
	PublicURL   string
	// Hosts are the host names the gateway connects to: Redis, upstreams,
	// the tracing endpoint. Issuers are not included (they must be
	// loopback or https, reached through whatever the deployment provides).
	Hosts []string
}

// ParseServerConfig reads the fields of [ServerConfig] from a gateway
// config, applying the gateway's defaults for the listen address.
func ParseServerConfig(data []byte) (ServerConfig, error) {
	var raw struct {
		Server struct {
			Listen      string `yaml:"listen"`
			AdminListen string `yaml:"admin_listen"`
			PublicURL   string `yaml:"public_url"`
		} `yaml:"server"`
		Sessions struct {
			Store string `yaml:"store"`
			Redis struct {
				Addrs []string `yaml:"addrs"`
			} `yaml:"redis"`
		} `yaml:"sessions"`
		Upstreams []struct {
			URL string `yaml:"url"`
		} `yaml:"upstreams"`
		Telemetry struct {
			Tracing struct {
				Enabled  bool   `yaml:"enabled"`
				Endpoint string `yaml:"endpoint"`
			} `yaml:"tracing"`
		} `yaml:"telemetry"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		return ServerConfig{}, fmt.Errorf("gateway config: %w", err)
	}
	c := ServerConfig{Listen: raw.Server.Listen, AdminListen: raw.Server.AdminListen, PublicURL: raw.Server.PublicURL}
	if c.Listen == "" {
		c.Listen = ":8080" // config.DefaultListen
	}
	if raw.Sessions.Store == "redis" {
		for _, a := range raw.Sessions.Redis.Addrs {
			if h, _, err := net.SplitHostPort(a); err == nil {
				c.Hosts = append(c.Hosts, h)
			}
		}
	}
	urls := []string{}
	for _, u := range raw.Upstreams {
		urls = append(urls, u.URL)
	}
	if raw.Telemetry.Tracing.Enabled && raw.Telemetry.Tracing.Endpoint != "" {
		urls = append(urls, raw.Telemetry.Tracing.Endpoint)
	}
	for _, s := range urls {
		if u, err := url.Parse(s); err == nil && u.Hostname() != "" {
			c.Hosts = append(c.Hosts, u.Hostname())
		}
	}
	return c, nil
}

// Validator runs `gateway validate` with a built gateway binary.
type Validator struct {
	// Binary is the path of the gateway binary.
	Binary string
}

// BuildGateway builds the gateway binary of the module at repoRoot into
// dir. It uses go's default flags, unlike the Dockerfile, so that packages
// the main module's `go vet` or `go build` compiled come from the build
// cache.
func BuildGateway(repoRoot, dir string) (*Validator, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/gateway")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	return &Validator{Binary: bin}, nil
}

// Validate runs `gateway validate -config file` with exactly env as the
// environment (nothing inherited: a ${VAR} the deployment does not provide
// is an error, as it would be at run time) and returns its output on
// failure.
func (v *Validator) Validate(file string, env map[string]string) error {
	cmd := exec.Command(v.Binary, "validate", "-config", file)
	cmd.Env = []string{}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		cmd.Env = append(cmd.Env, k+"="+env[k])
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("gateway validate -config %s: %v\n%s", file, err, strings.TrimSpace(out.String()))
	}
	return nil
}
