package transport

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpgw/gateway/internal/dispatch"
	"github.com/mcpgw/gateway/internal/jsonrpc"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/protocol"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// serveInitialize answers initialize (see dispatch.Server.Initialize).
func (h *Handler) serveInitialize(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, msg *jsonrpc.Message) {
	res, err := h.srv.Initialize(r.Context(), rq, msg)
	var je *jsonrpc.Error
	var ce *dispatch.CreateError
	switch {
	case errors.As(err, &je):
		writeJSON(w, http.StatusOK, jsonrpc.AppendError(nil, msg.ID, je))
	case errors.As(err, &ce):
		h.refuseCreate(w, r, rq, msg.ID, msg.Method, ce.Err)
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, msg.ID, jsonrpc.CodeInternalError, "Service Unavailable: session store unavailable")
	default:
		w.Header().Set(protocol.HeaderSessionID, rq.Session.ID)
		writeJSON(w, http.StatusOK, jsonrpc.AppendResult(nil, msg.ID, res))
	}
}

// serveRequest answers one JSON-RPC request of method m, of either
// revision.
func (h *Handler) serveRequest(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, msg *jsonrpc.Message, m *dispatch.Method) {
	out := newResponder(w)
	out.publicURL = rq.State().Config().Server.PublicURL
	out.onSSE = h.metrics.SSEStreamOpened
	out.logTo = h.logTarget(r, rq, 'p', msg.ID)
	out.deferHeaders()
	defer out.finish()
	defer func() {
		if out.sse {
			h.metrics.SSEStreamClosed()
		}
	}()
	ctx := h.callContext(r, rq, out)
	defer out.hangUp.done()
	if final := h.srv.Serve(ctx, rq, msg, out, m); final != nil {
		out.final(http.StatusOK, final)
	}
}

// serveBatch answers a JSON-RPC batch, which only 2025-03-26 allows (the
// 2025-06-18 changelog removed batching). Requests are served one after
// another and answered together in one application/json array;
// notifications relayed on the way are dropped, as a JSON answer has no
// room for them.
//
// A batch is one request to the gateway, so it is bounded like one: at
// most limits.batch_messages messages, all served within
// server.request_timeout together (a request reached after it is answered
// with the timeout error, unserved). The array is written as each answer
// is ready, so that the gateway holds one answer at a time, however large
// the lists the batch asks for.
func (h *Handler) serveBatch(w http.ResponseWriter, r *http.Request, rq *dispatch.Request, body []byte) {
	elems, err := jsonx.ParseArray(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeParseError, "Parse error: invalid batch")
		return
	}
	if len(elems) == 0 {
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest, "Invalid Request: empty batch")
		return
	}
	if max := rq.State().Config().Limits.BatchMessages; len(elems) > max {
		h.srv.LimitHit(r.Context(), rq, telemetry.LimitBatchMessages, "")
		writeError(w, http.StatusBadRequest, jsonrpc.ID{}, jsonrpc.CodeInvalidRequest,
			fmt.Sprintf("Invalid Request: a batch of %d messages exceeds limits.batch_messages (%d)", len(elems), max))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), rq.State().Config().Server.RequestTimeout.D())
	defer cancel()
	started, failed := false, false
	reply := func(m []byte) {
		if failed {
			return
		}
		sep := []byte{','}
		if !started {
			started = true
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			sep[0] = '['
		}
		if _, err := w.Write(sep); err != nil {
			failed = true
			return
		}
		if _, err := w.Write(m); err != nil {
			failed = true
		}
	}
	for _, e := range elems {
		if failed {
			break // the client is gone
		}
		msg, err := jsonrpc.Decode(e)
		switch {
		case err != nil:
			id := jsonrpc.NullID
			if msg != nil && msg.ID.IsValid() {
				id = msg.ID
			}
			reply(jsonrpc.AppendError(nil, id, jsonrpc.AsError(err)))
		case msg.Kind == jsonrpc.KindRequest && msg.Method == protocol.MethodInitialize:
			// 2025-03-26 basic/lifecycle: initialize MUST NOT be batched.
			reply(jsonrpc.AppendError(nil, msg.ID,
				jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Invalid Request: initialize cannot be part of a batch")))
		case msg.Kind == jsonrpc.KindRequest && ctx.Err() != nil:
			reply(jsonrpc.AppendError(nil, msg.ID, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Request timed out"}))
		case msg.Kind == jsonrpc.KindRequest:
			if final := h.srv.Dispatch(ctx, rq, msg, newCollector()); final != nil {
				reply(final)
			}
		case msg.Kind == jsonrpc.KindNotification:
			h.srv.Notification(ctx, rq, msg)
		}
	}
	if !started {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	_, _ = w.Write([]byte{']'})
}
