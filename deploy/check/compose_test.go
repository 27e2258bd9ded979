package check

import (
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	"gopkg.in/yaml.v3"
)

// The compose stack's files, relative to the repository root.
const (
	composeFile    = "docker-compose.yml"
	nginxConf      = "deploy/compose/nginx.conf"
	prometheusConf = "deploy/compose/prometheus.yml"
	// rootDockerfile builds the gateway image.
	rootDockerfile = "Dockerfile"
	// minGatewayReplicas is how many gateway services the stack runs.
	minGatewayReplicas = 2
)

// stack is the loaded compose project with what the tests derive from it.
type stack struct {
	*types.Project
	// hosts are the names that resolve on the compose network: service
	// names and network aliases, each to the service that owns the
	// network namespace.
	hosts map[string]string
	// gateways are the services running the gateway image, by name.
	gateways []string
}

func loadStack(t *testing.T) *stack {
	t.Helper()
	p, err := LoadCompose(t.Context(), repoPath(composeFile), nil)
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	s := &stack{Project: p, hosts: map[string]string{}}
	gatewayImages := map[string]bool{}
	for name, svc := range p.Services {
		if svc.NetworkMode == "" || svc.NetworkMode == "bridge" {
			s.hosts[name] = name
		}
		for _, n := range svc.Networks {
			if n == nil {
				continue
			}
			for _, a := range n.Aliases {
				s.hosts[a] = name
			}
		}
		if b := svc.Build; b != nil && b.Context == repoRoot && (b.Dockerfile == "" || path.Clean(b.Dockerfile) == rootDockerfile) {
			gatewayImages[svc.Image] = true
		}
	}
	for name, svc := range p.Services {
		if gatewayImages[svc.Image] {
			s.gateways = append(s.gateways, name)
		}
	}
	slices.Sort(s.gateways)
	return s
}

// TestComposeFiles checks that everything the stack builds or mounts
// exists, that images are pinned, and that services name each other
// correctly.
func TestComposeFiles(t *testing.T) {
	s := loadStack(t)
	if len(s.Services) == 0 {
		t.Fatal("no services")
	}
	for _, name := range slices.Sorted(maps.Keys(s.Services)) {
		svc := s.Services[name]
		at := composeFile + ": services." + name
		switch {
		case svc.Build != nil:
			ctx := svc.Build.Context
			if fi, err := os.Stat(ctx); err != nil || !fi.IsDir() {
				t.Errorf("%s: build context %q is not a directory", at, svc.Build.Context)
				continue
			}
			df := svc.Build.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			if !filepath.IsAbs(df) {
				df = filepath.Join(ctx, df)
			}
			problems, err := CheckDockerfile(ctx, df)
			if err != nil {
				t.Errorf("%s: %v", at, err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s", at, p)
			}
			if svc.Image != "" {
				if p := ImageProblem(svc.Image); p != "" {
					t.Errorf("%s: image %q (the built image's tag): %s", at, svc.Image, p)
				}
			}
		default:
			if p := ImageProblem(svc.Image); p != "" {
				t.Errorf("%s: image %q: %s", at, svc.Image, p)
			}
		}
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			// Docker would create a missing source as an empty directory,
			// and the container would start with no config.
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s: bind mount source %s does not exist", at, v.Source)
			}
			if !v.ReadOnly {
				t.Errorf("%s: bind mount of %s is writable: mount config and code read-only (:ro)", at, v.Source)
			}
		}
		for _, f := range svc.EnvFiles {
			if _, err := os.Stat(f.Path); err != nil && f.Required {
				t.Errorf("%s: env_file %q does not exist", at, f.Path)
			}
		}
		for _, p := range svc.Ports {
			if p.Published != "" && p.HostIP != "127.0.0.1" {
				t.Errorf("%s: port %s is published on every host interface: bind it to 127.0.0.1", at, p.Published)
			}
		}
	}
}

// gatewayInfo is what the stack's gateway services run with.
type gatewayInfo struct {
	service string
	// configFile is the config file on the host, relative to the
	// repository.
	configFile string
	env        map[string]string
	cfg        ServerConfig
	// names are the host names that reach this replica.
	names []string
}

// gatewayServices resolves each gateway service's -config through its bind
// mounts to a file of the repository.
func gatewayServices(t *testing.T, s *stack) []gatewayInfo {
	t.Helper()
	if len(s.gateways) < minGatewayReplicas {
		t.Fatalf("%s: %d services run the gateway image (built from %s), want at least %d: %v", composeFile, len(s.gateways), rootDockerfile, minGatewayReplicas, s.gateways)
	}
	var out []gatewayInfo
	for _, name := range s.gateways {
		svc := s.Services[name]
		at := composeFile + ": services." + name
		args := slices.Concat(svc.Entrypoint, svc.Command)
		i := slices.Index(args, "-config")
		if len(args) == 0 || args[0] != "serve" || i < 0 || i+1 >= len(args) {
			t.Errorf("%s: command %q is not serve -config FILE", at, args)
			continue
		}
		file := args[i+1]
		var host string
		for _, v := range svc.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			if rel, ok := strings.CutPrefix(file, strings.TrimSuffix(v.Target, "/")+"/"); ok {
				host = filepath.Join(v.Source, filepath.FromSlash(rel))
			} else if v.Target == file {
				host = v.Source
				t.Errorf("%s: %s is mounted as a single file: mount its directory, so that the gateway sees edits (an editor replaces the file)", at, v.Source)
			}
		}
		if host == "" {
			t.Errorf("%s: -config %s is not in any bind mount", at, file)
			continue
		}
		data, err := os.ReadFile(host)
		if err != nil {
			t.Errorf("%s: %v", at, err)
			continue
		}
		cfg, err := ParseServerConfig(data)
		if err != nil {
			t.Errorf("%s: %s: %v", at, host, err)
			continue
		}
		owner := name
		if other, ok := strings.CutPrefix(svc.NetworkMode, "service:"); ok {
			owner = other
		}
		var names []string
		for h, o := range s.hosts {
			if o == owner {
				names = append(names, h)
			}
		}
		slices.Sort(names)
		env := map[string]string{}
		for k, v := range svc.Environment {
			if v != nil {
				env[k] = *v
			}
		}
		rel, _ := filepath.Rel(repoRoot, host)
		out = append(out, gatewayInfo{service: name, configFile: filepath.ToSlash(rel), env: env, cfg: cfg, names: names})
	}
	return out
}

// TestComposeGateways validates each replica's config with the replica's
// environment and checks that the config, the load balancer and Prometheus
// agree on host names and ports.
func TestComposeGateways(t *testing.T) {
	s := loadStack(t)
	gws := gatewayServices(t, s)
	if t.Failed() {
		return
	}
	for _, g := range gws {
		t.Run(g.service, func(t *testing.T) {
			at := composeFile + ": services." + g.service
			if g.configFile != gws[0].configFile {
				t.Errorf("%s: runs with %s, %s with %s: replicas share one config", at, g.configFile, gws[0].service, gws[0].configFile)
			}
			if err := validator(t).Validate(repoPath(g.configFile), g.env); err != nil {
				t.Errorf("%s: %v", at, err)
			}
			for _, h := range g.cfg.Hosts {
				if !isLoopback(h) && s.hosts[h] == "" {
					t.Errorf("%s: %s connects to %q, which no service or alias of the stack is", at, g.configFile, h)
				}
			}
			if len(g.names) == 0 {
				t.Errorf("%s: no host name reaches it on the compose network", at)
			}
		})
	}

	// The load balancer sends to every replica, on its MCP port.
	conf, err := os.ReadFile(repoPath(nginxConf))
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*server\s+([^\s;{]+)[^;{]*;`).FindAllStringSubmatch(string(conf), -1) {
		servers[m[1]] = true
	}
	for _, d := range []string{"proxy_buffering off", "proxy_http_version 1.1", "proxy_read_timeout"} {
		if !strings.Contains(string(conf), d) {
			t.Errorf("%s: no %q: Server-Sent Events streams need it", nginxConf, d)
		}
	}
	// Prometheus scrapes every replica's admin port.
	var prom struct {
		ScrapeConfigs []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	data, err := os.ReadFile(repoPath(prometheusConf))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("%s: %v", prometheusConf, err)
	}
	targets := map[string]bool{}
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, tg := range st.Targets {
				targets[tg] = true
			}
		}
	}
	for _, g := range gws {
		hit := func(set map[string]bool, addr string) bool {
			for _, n := range g.names {
				if set[net.JoinHostPort(n, portString(addr))] {
					return true
				}
			}
			return false
		}
		if !hit(servers, g.cfg.Listen) {
			t.Errorf("%s: no upstream server reaches %s (%v) on its server.listen port (%s)", nginxConf, g.service, g.names, g.cfg.Listen)
		}
		if g.cfg.AdminListen == "" {
			t.Errorf("%s: server.admin_listen is off: nothing to scrape or probe", g.configFile)
		} else if !hit(targets, g.cfg.AdminListen) {
			t.Errorf("%s: no target scrapes %s (%v) on its server.admin_listen port (%s)", prometheusConf, g.service, g.names, g.cfg.AdminListen)
		}
	}
	for srv := range servers {
		h, _, err := net.SplitHostPort(srv)
		if err != nil || s.hosts[h] == "" {
			t.Errorf("%s: server %q is no service or alias of the stack", nginxConf, srv)
		}
	}
	for tg := range targets {
		h, _, err := net.SplitHostPort(tg)
		if err != nil || s.hosts[h] == "" {
			t.Errorf("%s: target %q is no service or alias of the stack", prometheusConf, tg)
		}
	}
}

// TestRootDockerfile checks the gateway image's Dockerfile for what the
// deployment relies on.
func TestRootDockerfile(t *testing.T) {
	problems, err := CheckDockerfile(repoRoot, repoPath(rootDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	f, err := os.Open(repoPath(rootDockerfile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ins, err := ParseDockerfile(f)
	if err != nil {
		t.Fatal(err)
	}
	// The final stage: from its FROM on.
	final := ins[lastIndex(ins, "FROM"):]
	get := func(cmd string) (Instruction, bool) {
		i := lastIndex(final, cmd)
		if i < 0 {
			return Instruction{}, false
		}
		return final[i], true
	}
	if u, ok := get("USER"); !ok {
		t.Error("the final stage sets no USER")
	} else if uid, _, _ := strings.Cut(u.Args[0], ":"); uid == "0" || uid == "root" {
		t.Errorf("line %d: USER %s is root", u.Line, u.Args[0])
	} else if _, err := strconv.Atoi(uid); err != nil {
		t.Errorf("line %d: USER %s: use a numeric uid, so that Kubernetes can enforce runAsNonRoot", u.Line, u.Args[0])
	}
	if e, ok := get("ENTRYPOINT"); !ok || len(e.Args) != 1 || e.Args[0] != "/gateway" {
		t.Errorf("ENTRYPOINT is %q, want [\"/gateway\"]", e.Args)
	}
	if c, ok := get("CMD"); !ok || !slices.Equal(c.Args[:min(1, len(c.Args))], []string{"serve"}) || !slices.Contains(c.Args, "-config") {
		t.Errorf("CMD is %q, want serve -config FILE", c.Args)
	}
	if e, ok := get("EXPOSE"); !ok || !slices.Contains(e.Args, "8080") || !slices.Contains(e.Args, "9090") {
		t.Errorf("EXPOSE is %q, want 8080 and 9090", e.Args)
	}
	var build string
	for _, in := range ins {
		if in.Cmd == "RUN" && slices.Contains(in.Args, "build") {
			build = strings.Join(in.Args, " ")
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "./cmd/gateway"} {
		if !strings.Contains(build, want) {
			t.Errorf("the go build RUN (%q) lacks %q", build, want)
		}
	}
}

func lastIndex(ins []Instruction, cmd string) int {
	for i := len(ins) - 1; i >= 0; i-- {
		if ins[i].Cmd == cmd {
			return i
		}
	}
	return -1
}

// TestLoadComposeRejects shows that the loader catches mistakes that
// docker compose would reject.
func TestLoadComposeRejects(t *testing.T) {
	const base = "x-a: &a\n  image: redis:7\n  restart: always\nservices:\n  r:\n    <<: *a\n"
	tests := []struct{ name, yaml string }{
		{"misspelt key", base + "    enviroment: {A: b}\n"},
		{"unknown service in depends_on", base + "    depends_on: [nope]\n"},
		{"unknown service in network_mode", base + "    network_mode: service:nope\n"},
		{"wrong type", base + "    ports: 8080\n"},
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "compose.yml")
	if err := os.WriteFile(file, []byte(base), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := LoadCompose(t.Context(), file, nil)
	if err != nil {
		t.Fatalf("the valid file: %v", err)
	}
	if r := p.Services["r"]; r.Image != "redis:7" || r.Restart != "always" {
		t.Errorf("merge key not resolved: image %q restart %q", r.Image, r.Restart)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := LoadCompose(t.Context(), file, nil); err == nil {
				t.Errorf("loaded without error:\n%s", tt.yaml)
			}
		})
	}
}

func TestParseDockerfile(t *testing.T) {
	const df = "# syntax=docker/dockerfile:1\nFROM --platform=$BUILDPLATFORM golang:1.26 AS build\nRUN --mount=type=cache,target=/x \\\n    # a comment\n    go build \\\n      -o /out ./cmd\nCOPY --from=build /out /gateway\nENTRYPOINT [\"/gateway\"]\n"
	ins, err := ParseDockerfile(strings.NewReader(df))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range ins {
		got = append(got, in.Cmd+" "+strings.Join(in.Args, " "))
	}
	want := []string{"FROM golang:1.26 AS build", "RUN go build -o /out ./cmd", "COPY /out /gateway", "ENTRYPOINT /gateway"}
	if !slices.Equal(got, want) {
		t.Errorf("mismatch:\n got %q\nwant %q", got, want)
	}
	if ins[0].Flags["platform"] != "$BUILDPLATFORM" || ins[2].Flags["from"] != "build" {
		t.Errorf("flags: %v, %v", ins[0].Flags, ins[2].Flags)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// portString returns the port of a host:port address.
func portString(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// TestDockerfileGoBuilds checks that each Go image's build stage copies
// everything its `go build` needs.
func TestDockerfileGoBuilds(t *testing.T) {
	s := loadStack(t)
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(s.Services)) {
		b := s.Services[name].Build
		if b == nil {
			continue
		}
		df := b.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		if !filepath.IsAbs(df) {
			df = filepath.Join(b.Context, df)
		}
		if seen[df] {
			continue
		}
		seen[df] = true
		problems, err := CheckGoBuild(b.Context, df, t.TempDir())
		if err != nil {
			t.Errorf("services.%s: %v", name, err)
		}
		for _, p := range problems {
			t.Errorf("services.%s: %s", name, p)
		}
	}
	if !seen[repoPath(rootDockerfile)] {
		t.Errorf("no service builds %s", rootDockerfile)
	}
}
