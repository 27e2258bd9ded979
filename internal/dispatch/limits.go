package dispatch

import "context"

// Limits at the HTTP edge: what one caller is refused when it asks for more
// than its share (sessions, streams, batch messages, body bytes and time).

// LimitHit records a refusal at limit (a telemetry.Limit* name): the metric,
// and an audit record naming the limit (see observe.Recorder.LimitHit).
func (h *Server) LimitHit(ctx context.Context, rq *Request, limit, method string) {
	h.obs.LimitHit(ctx, rq.asker(), limit, method)
}
