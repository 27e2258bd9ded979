// Package conformance runs the official MCP conformance suite
// (@modelcontextprotocol/conformance) through the gateway, with the direct
// run as the control: a scenario counts as the gateway's failure only when
// it passes without the gateway. Its tests are the package; viagateway is
// the command that puts the gateway between the suite's test servers and a
// client for the client scenarios.
package conformance
