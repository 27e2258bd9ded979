package testkit

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultProtocolVersion is the protocol version [Connect] asks for unless
// told otherwise. Without it the go-sdk client would try the stateless
// 2026-07-28 revision first.
const DefaultProtocolVersion = "2025-11-25"

// ConnectOptions configures [Connect]. A nil *ConnectOptions is the zero
// value.
type ConnectOptions struct {
	// Header is set on every HTTP request of the session, replacing any
	// value the SDK set for the same key.
	Header http.Header
	// ProtocolVersion is sent in initialize. If empty,
	// DefaultProtocolVersion.
	ProtocolVersion string
	// ProgressHandler, if non-nil, receives notifications/progress. The SDK
	// may call it concurrently with the return of the call it belongs to.
	ProgressHandler func(context.Context, *mcp.ProgressNotificationClientRequest)
	// LoggingHandler, if non-nil, receives notifications/message.
	LoggingHandler func(context.Context, *mcp.LoggingMessageRequest)
	// ToolListChangedHandler, if non-nil, receives
	// notifications/tools/list_changed.
	ToolListChangedHandler func(context.Context, *mcp.ToolListChangedRequest)
	// ElicitationHandler, if non-nil, answers elicitation/create (and the
	// client declares the elicitation capability).
	ElicitationHandler func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error)
	// CreateMessageHandler, if non-nil, answers sampling/createMessage
	// (and the client declares the sampling capability).
	//lint:ignore SA1019 sampling is deprecated only from 2026-07-28; the gateway still relays it
	CreateMessageHandler func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error)
	// ElicitationCompleteHandler, if non-nil, receives
	// notifications/elicitation/complete.
	ElicitationCompleteHandler func(context.Context, *mcp.ElicitationCompleteNotificationRequest)
	// ResourceUpdatedHandler, if non-nil, receives
	// notifications/resources/updated.
	ResourceUpdatedHandler func(context.Context, *mcp.ResourceUpdatedNotificationRequest)
	// Capabilities, if non-nil, replace the SDK's default client
	// capabilities (roots with listChanged); the handlers above still add
	// theirs.
	Capabilities *mcp.ClientCapabilities
}

// Connect returns a go-sdk client session to the Streamable HTTP MCP
// endpoint at url, initialized, and closed at the end of the test.
func Connect(t testing.TB, url string, opts *ConnectOptions) *mcp.ClientSession {
	t.Helper()
	if opts == nil {
		opts = &ConnectOptions{}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	httpClient := &http.Client{Transport: &headerTransport{base: transport, header: opts.Header}}

	client := mcp.NewClient(&mcp.Implementation{Name: "testkit", Version: "0.0.1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: opts.ProgressHandler,
		//lint:ignore SA1019 logging is deprecated only from 2026-07-28; the 2025-11-25 sessions the gateway serves still use it
		LoggingMessageHandler:      opts.LoggingHandler,
		ElicitationHandler:         opts.ElicitationHandler,
		ToolListChangedHandler:     opts.ToolListChangedHandler,
		ElicitationCompleteHandler: opts.ElicitationCompleteHandler,
		ResourceUpdatedHandler:     opts.ResourceUpdatedHandler,
		//lint:ignore SA1019 sampling is deprecated only from 2026-07-28; the gateway still relays it
		CreateMessageHandler: opts.CreateMessageHandler,
		Capabilities:         opts.Capabilities,
	})
	version := opts.ProtocolVersion
	if version == "" {
		version = DefaultProtocolVersion
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpClient},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("testkit: connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// headerTransport sets header on every request.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) == 0 {
		return t.base.RoundTrip(req)
	}
	// A RoundTripper must not modify the request it was given.
	req = req.Clone(req.Context())
	for k, vs := range t.header {
		req.Header[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	return t.base.RoundTrip(req)
}
