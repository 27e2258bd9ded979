package dispatch

import (
	"context"

	"github.com/mcpgw/gateway/internal/audit"
)

// Limits at the HTTP edge: what one caller is refused when it asks for more
// than its share (sessions, streams, batch messages, body bytes and time).
// Every refusal is counted in mcpgw_limit_rejections_total and audited as
// audit.EventLimit with the limit's name as the reason, so that an operator
// can tell which cap a tenant reached.

// LimitHit records a refusal at limit (a telemetry.Limit* name): the metric,
// and an audit record naming the limit.
func (h *Server) LimitHit(ctx context.Context, rq *Request, limit, method string) {
	tenant := rq.principal.Tenant
	h.metrics.LimitRejection(limit, tenant)
	r := audit.Record{
		Event: audit.EventLimit, Tenant: tenant, Subject: rq.principal.Subject, ClientID: rq.principal.ClientID,
		Method: method, Decision: audit.DecisionDeny, Outcome: audit.OutcomeDenied, Reason: limit,
	}
	if rq.Session != nil {
		r.SessionID = rq.Session.ID
	}
	h.audit.Record(ctx, r)
}
