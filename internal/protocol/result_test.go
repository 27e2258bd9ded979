package protocol

import (
	"encoding/json"
	"testing"
	"time"
)

func TestDecorateResult(t *testing.T) {
	info := json.RawMessage(`{"name":"gw","version":"1"}`)
	const meta = `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw","version":"1"}}`
	for _, tc := range []struct {
		name   string
		result string
		c      Caching
		want   string
	}{
		{"resultType added", `{"tools":[]}`, Caching{},
			`{"tools":[],"resultType":"complete",` + meta + `}`},
		{"resultType kept", `{"resultType":"input_required"}`, Caching{},
			`{"resultType":"input_required",` + meta + `}`},
		{"_meta merged", `{"_meta":{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`, Caching{},
			`{"_meta":{"a":1,"io.modelcontextprotocol/serverInfo":{"name":"gw","version":"1"}},"resultType":"complete"}`},
		{"_meta not an object", `{"_meta":3}`, Caching{},
			`{` + meta + `,"resultType":"complete"}`},
		{"list cached", `{}`, Caching{Scope: CachePrivate, TTL: 90 * time.Second},
			`{"resultType":"complete",` + meta + `,"ttlMs":90000,"cacheScope":"private"}`},
		{"read not to be reused", `{"ttlMs":5}`, Caching{Scope: CachePrivate},
			`{"ttlMs":0,"resultType":"complete",` + meta + `,"cacheScope":"private"}`},
		{"not an object", `[1]`, Caching{Scope: CachePrivate}, `[1]`},
		{"invalid JSON", `{"a":`, Caching{}, `{"a":`},
		{"duplicate members", `{"a":1,"a":2}`, Caching{}, `{"a":1,"a":2}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(DecorateResult(json.RawMessage(tc.result), info, tc.c)); got != tc.want {
				t.Errorf("DecorateResult(%s) =\n%s\nwant\n%s", tc.result, got, tc.want)
			}
		})
	}
}
