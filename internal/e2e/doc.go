// Package e2e holds end-to-end tests of the built gateway binary deployed
// as it is in production: several `gateway serve` replicas sharing one
// Redis, behind a plain round-robin load balancer, trusting a real OpenID
// provider, in front of real MCP upstreams. Everything runs on 127.0.0.1
// and is started and stopped by the tests, through internal/testkit
// (a private redis-server, so the tests may kill and restart it).
//
// It also holds the benchmark that compares the memory and Redis session
// stores in one run:
//
//	go test -run '^$' -bench BenchmarkGatewayStore ./internal/e2e/
//
// The package has tests only; nothing imports it.
package e2e
