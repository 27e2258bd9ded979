package session_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/session"
)

// benchStores are the stores the Store benchmarks compare, run side by side
// so that one run gives their ratio. The Redis one needs the test Redis.
var benchStores = []struct {
	name string
	new  func(b *testing.B) session.Store
}{
	{"memory", func(b *testing.B) session.Store {
		m := session.NewMemory(session.MemoryOptions{IdleTTL: time.Hour})
		b.Cleanup(func() { m.Close() })
		return m
	}},
	{"redis", func(b *testing.B) session.Store {
		return newRedisEnv(b).store(session.RedisOptions{IdleTTL: time.Hour})
	}},
}

// benchRecord is a record of a realistic size: a client's initialize params
// and three upstreams.
func benchRecord() *session.Record {
	caps := json.RawMessage(`{"tools":{"listChanged":true},"resources":{"subscribe":true,"listChanged":true},"prompts":{"listChanged":true},"logging":{}}`)
	return &session.Record{
		ID:                 session.NewID(),
		ProtocolVersion:    "2025-11-25",
		ClientInfo:         json.RawMessage(`{"name":"claude-ai","title":"Claude","version":"0.1.0"}`),
		ClientCapabilities: json.RawMessage(`{"roots":{"listChanged":true},"sampling":{},"elicitation":{}}`),
		Principal:          session.Principal{Issuer: "https://issuer.example", Subject: "user-1234567890", Tenant: "acme"},
		Upstreams: map[string]session.Upstream{
			"github": {SessionID: session.NewID(), ProtocolVersion: "2025-06-18", Capabilities: caps},
			"jira":   {SessionID: session.NewID(), ProtocolVersion: "2025-03-26", Capabilities: caps},
			"search": {ProtocolVersion: "2025-06-18", Capabilities: caps},
		},
	}
}

// BenchmarkStoreGet measures Get, the call every request with a session
// makes, from parallel goroutines over 1024 sessions.
func BenchmarkStoreGet(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.new(b)
			ids := make([]string, 1024)
			for i := range ids {
				r := benchRecord()
				if err := s.Create(b.Context(), r); err != nil {
					b.Fatal(err)
				}
				ids[i] = r.ID
			}
			var next atomic.Uint32
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(97))
				for pb.Next() {
					i++
					if _, err := s.Get(b.Context(), ids[i%len(ids)]); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkStoreSetUpstream measures successful compare-and-swaps: each
// goroutine flips one upstream of its own session between two session ids.
func BenchmarkStoreSetUpstream(b *testing.B) {
	for _, bs := range benchStores {
		b.Run(bs.name, func(b *testing.B) {
			s := bs.new(b)
			caps := json.RawMessage(`{"tools":{"listChanged":true}}`)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := benchRecord()
				if err := s.Create(b.Context(), r); err != nil {
					b.Error(err)
					return
				}
				sids := [2]string{r.Upstreams["github"].SessionID, session.NewID()}
				for i := 0; pb.Next(); i++ {
					u := session.Upstream{SessionID: sids[(i+1)%2], ProtocolVersion: "2025-06-18", Capabilities: caps}
					if _, err := s.SetUpstream(b.Context(), r.ID, "github", sids[i%2], u); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
