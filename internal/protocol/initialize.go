package protocol

import (
	"encoding/json"

	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
)

// An Initialize is a client's initialize request as a session keeps it.
type Initialize struct {
	// Version is the negotiated version (2025-11-25 basic/lifecycle,
	// "Version Negotiation"): the client's if it is one of
	// SessionVersions, else LatestSession.
	Version string
	// ClientInfo and Capabilities are the client's, raw.
	ClientInfo, Capabilities json.RawMessage
}

// ParseInitialize reads initialize's params. The session keeps the
// client's info and capabilities for its life, and their size is the
// client's choice: one larger than infoMax or capsMax bytes is refused,
// and tooBig says which ("clientInfo" or "capabilities").
func ParseInitialize(params json.RawMessage, infoMax, capsMax int) (in Initialize, tooBig string, err error) {
	p, err := jsonx.ParseValidObject(params)
	if err != nil {
		return in, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: initialize params must be an object")
	}
	v, ok := p.GetString("protocolVersion")
	if !ok {
		return in, "", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: protocolVersion is required")
	}
	in.ClientInfo, in.Capabilities = p.Get("clientInfo"), p.Get("capabilities")
	if len(in.ClientInfo) > infoMax {
		return in, "clientInfo", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: clientInfo exceeds limits.client_info_bytes (%d bytes)", infoMax)
	}
	if len(in.Capabilities) > capsMax {
		return in, "capabilities", jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "Invalid params: capabilities exceed limits.client_capabilities_bytes (%d bytes)", capsMax)
	}
	in.Version = LatestSession.String()
	if Listed(v, SessionVersions) {
		in.Version = v
	}
	return in, "", nil
}

// InitializeResult encodes initialize's result.
func InitializeResult(version string, caps map[string]json.RawMessage, serverName, serverVersion, instructions string) json.RawMessage {
	res, _ := json.Marshal(struct {
		ProtocolVersion string                     `json:"protocolVersion"`
		Capabilities    map[string]json.RawMessage `json:"capabilities"`
		ServerInfo      map[string]string          `json:"serverInfo"`
		Instructions    string                     `json:"instructions,omitempty"`
	}{version, caps, map[string]string{"name": serverName, "version": serverVersion}, instructions})
	return res
}
