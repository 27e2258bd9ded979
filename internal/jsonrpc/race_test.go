//go:build race

package jsonrpc

// raceEnabled: the race detector's instrumentation adds allocations of
// its own, so allocation counts are checked only without it.
const raceEnabled = true
