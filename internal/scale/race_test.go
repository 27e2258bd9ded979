//go:build race

package scale

// raceEnabled: the race detector slows the test process (here, the gateway
// of the in-process tests too) several times over.
const raceEnabled = true
