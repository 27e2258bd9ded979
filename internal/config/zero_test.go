package config

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// nest writes "a.b.c: v" as nested YAML mappings, each level indented two
// more spaces than indent.
func nest(indent int, path, value string) string {
	var b strings.Builder
	keys := strings.Split(path, ".")
	for i, k := range keys {
		b.WriteString(strings.Repeat(" ", indent+2*i) + k + ":")
		if i == len(keys)-1 {
			b.WriteString(" " + value)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestExplicitZeros: every setting with a default, written as 0 (or 0s).
// Where the documentation gives 0 a meaning, the 0 stays (it is not
// replaced by the default); everywhere else it is an error, never
// silently the default (docs/configuration.md, "Rules that apply to every
// key").
func TestExplicitZeros(t *testing.T) {
	const base = "auth: {anonymous: true}\n%TOP%upstreams:\n  - name: u\n    url: http://127.0.0.1:1/mcp\n%UP%"
	stdio := "upstreams:\n  - name: u\n    command: [server]\n    stdio:\n"
	type tc struct {
		key  string // the reported path
		top  string // YAML at the top level
		up   string // YAML in the upstream's mapping
		yaml string // the whole file, instead of base
		// keep checks the config of a 0 that keeps its meaning; nil
		// means the 0 is an error at key.
		keep func(*Config) bool
	}
	top := func(path, v string) tc { return tc{key: path, top: nest(0, path, v)} }
	up := func(path, v string) tc { return tc{key: "upstreams[0]." + path, up: nest(4, path, v)} }
	cases := []tc{
		// 0 means something: it stays.
		{key: "server.drain_delay", top: nest(0, "server.drain_delay", "0s"),
			keep: func(c *Config) bool { return c.Server.DrainDelay != nil && *c.Server.DrainDelay == 0 }},
		{key: "upstreams[0].concurrency.queue", up: "    concurrency: {max_in_flight: 4, queue: 0}\n",
			keep: func(c *Config) bool {
				cc := c.Upstreams[0].Concurrency
				return cc.Queue != nil && *cc.Queue == 0 && cc.QueueSize() == 0 && cc.TenantQueue() == 0
			}},
		{key: "upstreams[0].concurrency.queue", up: "    concurrency: {max_in_flight: 4, per_tenant: 1, queue: 0}\n",
			keep: func(c *Config) bool { return c.Upstreams[0].Concurrency.QueueSize() == 0 }},
		{key: "telemetry.tracing.sample_ratio", top: nest(0, "telemetry.tracing.sample_ratio", "0"),
			keep: func(c *Config) bool {
				return c.Telemetry.Tracing.SampleRatio != nil && *c.Telemetry.Tracing.SampleRatio == 0
			}},
		{key: "sessions.redis.db", top: nest(0, "sessions.redis.db", "0"),
			keep: func(c *Config) bool { return c.Sessions.Redis.DB == 0 }},
		{key: "budgets.redis.db", top: nest(0, "budgets.redis.db", "0"),
			keep: func(c *Config) bool { return c.Budgets.Redis != nil && c.Budgets.Redis.DB == 0 }},
		{key: "upstreams[0].prefix", up: "    prefix: \"\"\n",
			keep: func(c *Config) bool { return c.Upstreams[0].Prefix != nil && c.Upstreams[0].EffectivePrefix() == "" }},
		{key: "upstreams[0].watch", up: "    watch: false\n",
			keep: func(c *Config) bool { return !c.Upstreams[0].Watches() }},
		// A stdio share of 0: no bound beyond the pool.
		{key: "upstreams[0].stdio.max_processes_per_principal", yaml: stdio + "      max_processes_per_principal: 0\n",
			keep: func(c *Config) bool { p, _ := c.Upstreams[0].Stdio.Shares(); return p == 0 }},
		{key: "upstreams[0].stdio.max_processes_per_tenant", yaml: stdio + "      max_processes_per_tenant: 0\n",
			keep: func(c *Config) bool { _, t := c.Upstreams[0].Stdio.Shares(); return t == 0 }},
		{key: "limits.stdio_processes_per_principal", top: nest(0, "limits.stdio_processes_per_principal", "0"),
			keep: func(c *Config) bool { p, _ := c.Limits.StdioShares(); return p == 0 }},
		{key: "limits.stdio_processes_per_tenant", top: nest(0, "limits.stdio_processes_per_tenant", "0"),
			keep: func(c *Config) bool { _, t := c.Limits.StdioShares(); return t == 0 }},

		// 0 means nothing: an error, not the default.
		top("server.max_body_bytes", "0"),
		top("server.request_timeout", "0s"),
		top("server.read_header_timeout", "0s"),
		top("server.read_body_timeout", "0s"),
		top("server.list_cache_ttl", "0s"),
		top("server.shutdown_grace", "0s"),
		top("sessions.idle_ttl", "0s"),
		top("sessions.max_sessions", "0"),
		top("sessions.max_per_principal", "0"),
		top("sessions.max_per_tenant", "0"),
		top("sessions.mailbox_messages", "0"),
		top("sessions.mailbox_bytes", "0"),
		top("sessions.tasks.max_per_principal", "0"),
		top("sessions.tasks.max_per_tenant", "0"),
		top("sessions.tasks.max_tasks", "0"),
		top("sessions.tasks.max_ttl", "0s"),
		top("sessions.tasks.list_page_size", "0"),
		top("sessions.events.per_stream", "0"),
		top("sessions.events.bytes_per_stream", "0"),
		top("sessions.events.ttl", "0s"),
		top("sessions.events.streams_per_session", "0"),
		top("sessions.events.max_streams", "0"),
		top("sessions.events.max_bytes", "0"),
		top("sessions.events.max_streams_per_principal", "0"),
		top("sessions.events.max_streams_per_tenant", "0"),
		top("sessions.events.max_bytes_per_principal", "0"),
		top("sessions.events.max_bytes_per_tenant", "0"),
		top("sessions.redis.timeout", "0s"),
		top("budgets.redis.timeout", "0s"),
		top("vault.consent_ttl", "0s"),
		top("vault.pending_per_principal", "0"),
		top("vault.pending", "0"),
		top("vault.pending_per_tenant", "0"),
		top("vault.tokens_per_tenant", "0"),
		top("vault.tokens", "0"),
		top("identity.token_ttl", "0s"),
		top("limits.streams_per_principal", "0"),
		top("limits.streams_per_tenant", "0"),
		top("limits.batch_messages", "0"),
		top("limits.client_info_bytes", "0"),
		top("limits.client_capabilities_bytes", "0"),
		top("limits.parked_calls_per_principal", "0"),
		top("limits.detached_calls_per_principal", "0"),
		top("limits.list_pages", "0"),
		top("limits.list_bytes", "0"),
		top("limits.stdio_processes", "0"),
		top("limits.upstream_streams", "0"),
		top("limits.upstream_streams_per_principal", "0"),
		top("limits.upstream_streams_per_tenant", "0"),
		top("limits.detached_calls_per_tenant", "0"),
		top("limits.detached_calls", "0"),
		up("timeout", "0s"),
		{key: "upstreams[0].concurrency.max_in_flight", up: "    concurrency: {max_in_flight: 0}\n"},
		{key: "upstreams[0].concurrency.per_tenant", up: "    concurrency: {max_in_flight: 4, per_tenant: 0}\n"},
		{key: "upstreams[0].concurrency.queue_per_tenant", up: "    concurrency: {max_in_flight: 4, queue_per_tenant: 0}\n"},
		{key: "upstreams[0].concurrency.queue_per_principal", up: "    concurrency: {max_in_flight: 4, queue_per_principal: 0}\n"},
		{key: "upstreams[0].concurrency.queue_timeout", up: "    concurrency: {max_in_flight: 4, queue_timeout: 0s}\n"},
		up("circuit_breaker.failures", "0"),
		up("circuit_breaker.open_for", "0s"),
		up("circuit_breaker.half_open_probes", "0"),
		{key: "upstreams[0].stdio.max_processes", yaml: stdio + "      max_processes: 0\n"},
		{key: "upstreams[0].stdio.idle_timeout", yaml: stdio + "      idle_timeout: 0s\n"},
		{key: "upstreams[0].stdio.stop_grace", yaml: stdio + "      stop_grace: 0s\n"},
		{key: "upstreams[0].openapi.max_document_bytes", yaml: "upstreams:\n  - name: u\n    openapi:\n      document: x.json\n      max_document_bytes: 0\n"},
		{key: "budgets.rate_limits[0].requests", top: "budgets:\n  rate_limits: [{name: r, requests: 0}]\n"},
		{key: "budgets.rate_limits[0].interval", top: "budgets:\n  rate_limits: [{name: r, requests: 1, interval: 0s}]\n"},
		{key: "budgets.rate_limits[0].burst", top: "budgets:\n  rate_limits: [{name: r, requests: 1, burst: 0}]\n"},
		{key: "budgets.quotas[0].calls", top: "budgets:\n  quotas: [{name: q, calls: 0}]\n"},
		{key: "tenants[0].budgets.rate_limits[0].burst", top: "tenants:\n  - id: t\n    budgets: {rate_limits: [{name: r, requests: 1, burst: 0}]}\n"},
		{key: "tenants[0].tool_search.max_results", top: "tenants:\n  - id: t\n    tool_search: {max_results: 0}\n"},
		top("policy.cel_cost_limit", "0"),
		{key: "policy.pdp.timeout", top: "policy:\n  pdp: {url: http://127.0.0.1:1, timeout: 0s}\n"},
		{key: "policy.pdp.cache_ttl", top: "policy:\n  pdp: {url: http://127.0.0.1:1, cache_ttl: 0s}\n"},
		{key: "policy.pdp.cache_size", top: "policy:\n  pdp: {url: http://127.0.0.1:1, cache_size: 0}\n"},
		{key: "upstreams[0].guards[0].max_bytes", up: "    guards: [{detect: [credentials], max_bytes: 0}]\n"},
		{key: "upstreams[0].guards[0].webhook.timeout", up: "    guards: [{webhook: {url: http://127.0.0.1:1, timeout: 0s}}]\n"},
		{key: "upstreams[0].guards[0].webhook.max_response_bytes", up: "    guards: [{webhook: {url: http://127.0.0.1:1, max_response_bytes: 0}}]\n"},
		{key: "upstreams[0].guards[0].webhook.max_in_flight", up: "    guards: [{webhook: {url: http://127.0.0.1:1, max_in_flight: 0}}]\n"},
		{key: "tenants[0].guards[0].max_bytes", top: "tenants:\n  - id: t\n    guards: [{detect: [credentials], max_bytes: 0}]\n"},
		{key: "tenants[0].guards[0].webhook.timeout", top: "tenants:\n  - id: t\n    guards: [{webhook: {url: http://127.0.0.1:1, timeout: 0s}}]\n"},
		{key: "tenants[0].guards[0].webhook.max_response_bytes", top: "tenants:\n  - id: t\n    guards: [{webhook: {url: http://127.0.0.1:1, max_response_bytes: 0}}]\n"},
		{key: "tenants[0].guards[0].webhook.max_in_flight", top: "tenants:\n  - id: t\n    guards: [{webhook: {url: http://127.0.0.1:1, max_in_flight: 0}}]\n"},
		{key: "tenants[0].upstreams[0].guards[0].max_bytes", top: "tenants:\n  - id: t\n    upstreams: [{name: u, guards: [{detect: [credentials], max_bytes: 0}]}]\n"},
		{key: "tenants[0].upstreams[0].guards[0].webhook.timeout", top: "tenants:\n  - id: t\n    upstreams: [{name: u, guards: [{webhook: {url: http://127.0.0.1:1, timeout: 0s}}]}]\n"},
		{key: "tenants[0].upstreams[0].guards[0].webhook.max_response_bytes", top: "tenants:\n  - id: t\n    upstreams: [{name: u, guards: [{webhook: {url: http://127.0.0.1:1, max_response_bytes: 0}}]}]\n"},
		{key: "tenants[0].upstreams[0].guards[0].webhook.max_in_flight", top: "tenants:\n  - id: t\n    upstreams: [{name: u, guards: [{webhook: {url: http://127.0.0.1:1, max_in_flight: 0}}]}]\n"},
		top("auth.leeway", "0s"),
		top("auth.token_cache_size", "0"),
	}
	// Every number in the schema is in the table (a tenant's rate limit
	// stands for all of its keys, as the top level's do).
	covered := map[string]bool{"tenants[].budgets.rate_limits[].requests": true, "tenants[].budgets.rate_limits[].interval": true,
		"tenants[].budgets.quotas[].calls": true}
	for _, c := range cases {
		covered[regexp.MustCompile(`\[\d+\]`).ReplaceAllString(c.key, "[]")] = true
	}
	for _, k := range numberKeys(reflect.TypeFor[Config](), "") {
		if !covered[k] {
			t.Errorf("%s: not in the table of explicit zeros", k)
		}
	}

	for _, c := range cases {
		name := c.key
		if c.keep != nil {
			name += "/kept"
		}
		t.Run(name, func(t *testing.T) {
			yaml := c.yaml
			if yaml == "" {
				yaml = strings.NewReplacer("%TOP%", c.top, "%UP%", c.up).Replace(base)
			}
			if strings.HasPrefix(c.key, "auth.") {
				yaml = strings.Replace(yaml, "auth: {anonymous: true}\n", "", 1)
				yaml = strings.Replace(yaml, "auth:\n", "auth:\n  anonymous: true\n", 1)
			} else if c.yaml != "" {
				yaml = "auth: {anonymous: true}\n" + yaml
			}
			got, err := Parse("test.yaml", []byte(yaml), env(nil))
			if c.keep != nil {
				if err != nil {
					t.Fatalf("%v\n%s", err, yaml)
				}
				if !c.keep(got) {
					t.Errorf("the explicit 0 of %s was not kept", c.key)
				}
				return
			}
			if err == nil {
				t.Fatalf("an explicit 0 of %s was accepted\n%s", c.key, yaml)
			}
			if !strings.Contains(err.Error(), ": "+c.key+": must be positive") {
				t.Errorf("error %q, want %s: must be positive", err, c.key)
			}
		})
	}
}

// numberKeys returns the paths of the integer, float and duration keys
// of t, lists written "[]".
func numberKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		switch {
		case ft == durationType:
			keys = append(keys, prefix+name)
		case ft.Kind() == reflect.Struct:
			keys = append(keys, numberKeys(ft, prefix+name+".")...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, numberKeys(ft.Elem(), prefix+name+"[].")...)
		case ft.Kind() == reflect.Map && ft.Elem().Kind() == reflect.Struct:
			keys = append(keys, numberKeys(ft.Elem(), prefix+name+".*.")...)
		case ft.Kind() == reflect.Int, ft.Kind() == reflect.Int64, ft.Kind() == reflect.Float64:
			keys = append(keys, prefix+name)
		}
	}
	return keys
}

// TestConcurrencyQueueDefaults: queue defaults to max_in_flight and each
// tenant's share of it to half, rounded up; written values stay, a share
// larger than the queue is warned about (and caps at the queue), and a
// negative queue is an error.
func TestConcurrencyQueueDefaults(t *testing.T) {
	for _, c := range []struct {
		conc        string
		queue, each int
		warn, err   string
	}{
		{conc: "{max_in_flight: 4}", queue: 4, each: 2},
		{conc: "{max_in_flight: 1}", queue: 1, each: 1},
		{conc: "{max_in_flight: 4, queue: 7}", queue: 7, each: 4},
		{conc: "{max_in_flight: 4, queue: 0}", queue: 0, each: 0},
		{conc: "{max_in_flight: 4, queue: 8, queue_per_tenant: 8}", queue: 8, each: 8},
		{conc: "{max_in_flight: 4, queue: 2, queue_per_tenant: 3}", queue: 2, each: 2,
			warn: "upstreams[0].concurrency.queue_per_tenant: 3 is more than queue (2): it never applies"},
		{conc: "{max_in_flight: 4, queue: -1}", err: "upstreams[0].concurrency.queue: must not be negative"},
	} {
		got, err := Parse("test.yaml", []byte("auth: {anonymous: true}\nupstreams:\n  - name: u\n    url: http://127.0.0.1:1/mcp\n    concurrency: "+c.conc+"\n"), env(nil))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: error %v, want %q", c.conc, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.conc, err)
			continue
		}
		cc := got.Upstreams[0].Concurrency
		if cc.Queue == nil || *cc.Queue != c.queue || cc.QueueSize() != c.queue || cc.TenantQueue() != c.each {
			t.Errorf("%s: queue %d, each %d; want %d, %d", c.conc, cc.QueueSize(), cc.TenantQueue(), c.queue, c.each)
		}
		var warns []string
		for _, w := range got.Warnings {
			warns = append(warns, w.Error())
		}
		if all := strings.Join(warns, "\n"); c.warn == "" && all != "" || !strings.Contains(all, c.warn) {
			t.Errorf("%s: warnings %q, want %q", c.conc, all, c.warn)
		}
	}
}
