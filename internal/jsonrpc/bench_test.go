package jsonrpc

import (
	"strings"
	"testing"
)

func benchMessage(n int) []byte {
	return []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"up__echo","arguments":{"text":"` +
		strings.Repeat("x", n) + `"},"_meta":{"progressToken":"p"}}}`)
}

func BenchmarkDecode(b *testing.B) {
	for _, n := range []int{100, 10000} {
		msg := benchMessage(n)
		b.Run(strings.Repeat("x", 0)+map[int]string{100: "100B", 10000: "10KB"}[n], func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
