package config

import (
	"strings"
	"testing"
)

// TestSessionShareDefaults: the per-principal and per-tenant caps of a
// shared pool default to a share of it (a tenth and a half), so that a
// small pool is not one principal's; explicit values stay, and Validate
// warns of one larger than its pool.
func TestSessionShareDefaults(t *testing.T) {
	const base = "upstreams: [{name: a, url: \"http://a/mcp\"}]\nauth: {anonymous: true}\n"
	for _, tc := range []struct {
		name, yaml             string
		prin, tenant           int
		evStreamsP, evStreamsT int
		evBytesP, evBytesT     int64
		tasksP, tasksT         int
		warnings               []string
	}{
		{
			name: "defaults", yaml: "",
			prin: 100, tenant: 10_000, evStreamsP: 10_000, evStreamsT: 50_000, evBytesP: (256 << 20) / 10, evBytesT: 128 << 20,
		},
		{
			name: "small pools", yaml: "sessions: {max_sessions: 40, tasks: {max_tasks: 60}, events: {max_streams: 30, max_bytes: 10000000, bytes_per_stream: 1000000}}\n",
			prin: 4, tenant: 20, evStreamsP: 3, evStreamsT: 15, evBytesP: 1_000_000, evBytesT: 5_000_000,
			tasksP: 6, tasksT: 30,
		},
		{
			name: "tiny pool", yaml: "sessions: {max_sessions: 1}\n",
			prin: 1, tenant: 1, evStreamsP: 10_000, evStreamsT: 50_000, evBytesP: (256 << 20) / 10, evBytesT: 128 << 20,
		},
		{
			name: "explicit, larger than the pools",
			yaml: "sessions: {max_sessions: 40, max_per_principal: 100, max_per_tenant: 50, tasks: {max_tasks: 5, max_per_principal: 6}, events: {max_streams: 10, max_streams_per_principal: 11, max_bytes: 2000000, max_bytes_per_tenant: 3000000}}\n",
			prin: 100, tenant: 50, evStreamsP: 11, evStreamsT: 5, evBytesP: 200_000, evBytesT: 3_000_000,
			warnings: []string{
				"sessions.max_per_principal: 100 exceeds sessions.max_sessions (40): it is no share",
				"sessions.max_per_tenant: 50 exceeds sessions.max_sessions (40): it is no share",
				"sessions.tasks.max_per_principal: 6 exceeds sessions.tasks.max_tasks (5): it is no share",
				"sessions.events.max_streams_per_principal: 11 exceeds sessions.events.max_streams (10): it is no share",
				"sessions.events.max_bytes_per_tenant: 3000000 exceeds sessions.events.max_bytes (2000000): it is no share",
				"sessions.events.max_streams_per_principal: 11 exceeds sessions.events.max_streams_per_tenant (5): it is no share",
				"sessions.events.bytes_per_stream: 1048576 exceeds sessions.events.max_bytes_per_principal (200000): a stream whose log grows past the share loses it",
				"sessions.max_per_principal: 100 exceeds sessions.max_per_tenant (50): it is no share",
			},
		},
		{
			name: "redis has no pool", yaml: "sessions: {store: redis, max_sessions: 40, max_per_principal: 100, max_per_tenant: 1000}\n",
			prin: 100, tenant: 1000, evStreamsP: 10_000, evStreamsT: 50_000, evBytesP: (256 << 20) / 10, evBytesT: 128 << 20,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse("test.yaml", []byte(base+tc.yaml), env(nil))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			s, ev := c.Sessions, c.Sessions.Events
			if s.MaxPerPrincipal != tc.prin || s.MaxPerTenant != tc.tenant {
				t.Errorf("max_per_principal, max_per_tenant = %d, %d; want %d, %d", s.MaxPerPrincipal, s.MaxPerTenant, tc.prin, tc.tenant)
			}
			if ev.MaxStreamsPerPrincipal != tc.evStreamsP || ev.MaxStreamsPerTenant != tc.evStreamsT ||
				ev.MaxBytesPerPrincipal != tc.evBytesP || ev.MaxBytesPerTenant != tc.evBytesT {
				t.Errorf("events shares = %d, %d, %d, %d; want %d, %d, %d, %d",
					ev.MaxStreamsPerPrincipal, ev.MaxStreamsPerTenant, ev.MaxBytesPerPrincipal, ev.MaxBytesPerTenant,
					tc.evStreamsP, tc.evStreamsT, tc.evBytesP, tc.evBytesT)
			}
			if tc.tasksP != 0 && (s.Tasks.MaxPerPrincipal != tc.tasksP || s.Tasks.MaxPerTenant != tc.tasksT) {
				t.Errorf("tasks shares = %d, %d; want %d, %d", s.Tasks.MaxPerPrincipal, s.Tasks.MaxPerTenant, tc.tasksP, tc.tasksT)
			}
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			var got []string
			for _, w := range c.Warnings {
				_, rest, _ := strings.Cut(w.Error(), ": ")
				got = append(got, rest)
			}
			if strings.Join(got, "\n") != strings.Join(tc.warnings, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.warnings, "\n"))
			}
		})
	}
}
