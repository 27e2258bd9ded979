package gateway

import "github.com/mcpgw/gateway/internal/vault"

// VaultOf returns the vault of g's user_oauth tokens.
func VaultOf(g *Gateway) *vault.Vault { return g.server.Broker().Vault() }
