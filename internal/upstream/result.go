package upstream

import (
	"encoding/json"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// Result reads r until its answer and returns the result, or the error
// response as a *jsonrpc.Error; what comes before it (notifications, the
// upstream's requests) is dropped. It does not close r.
func (r *Response) Result() (json.RawMessage, error) {
	for {
		msg, _, err := r.Next()
		if err != nil {
			return nil, err
		}
		switch msg.Kind {
		case jsonrpc.KindResponse:
			return msg.Result, nil
		case jsonrpc.KindErrorResponse:
			return nil, msg.Error
		}
	}
}
