package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mcpgw/gateway/internal/catalog"
	"github.com/mcpgw/gateway/internal/config"
	"github.com/mcpgw/gateway/internal/jsonx"
	"github.com/mcpgw/gateway/internal/rpcerr"
	"github.com/mcpgw/gateway/internal/telemetry"
)

// checkArguments checks a tools/call's arguments against the inputSchema
// of the tool it resolved to, before anything is spent on it: a violation
// is answered with a tool error the model can correct (SEP-1303: input
// validation errors are tool execution errors, not protocol errors), and
// the upstream is not called. It returns that failure, or nil to go on.
func (rq *Request) checkArguments(up *upstreamRef, it *catalog.Item, c *call) error {
	if !up.Cfg.ValidateArguments() {
		return nil
	}
	var se *catalog.SchemaError
	if err := it.ValidateArguments(c.arguments); !errors.As(err, &se) {
		return nil
	}
	rq.h.metrics.SchemaViolation(rq.view.ID, up.Cfg.Name, telemetry.SchemaInput)
	return rpcerr.FailTool("Invalid arguments for tool " + strconv.Quote(c.target) + ":\n" + se.Problems)
}

// checkResult checks a tools/call result's structuredContent against the
// tool's outputSchema as the upstream's validation.results says: warn logs
// and counts a mismatch, enforce also turns it into a tool error. A tool
// error's result (isError) is not checked: the schema describes results,
// not errors. It returns the result, or the failure that withholds it.
func (rq *Request) checkResult(ctx context.Context, up *upstreamRef, it *catalog.Item, c *call, res json.RawMessage, isError bool) (json.RawMessage, error) {
	mode := up.Cfg.ResultValidation()
	if mode == config.ValidationOff || isError || !it.HasOutputSchema() {
		return res, nil
	}
	o, err := jsonx.ParseValidObject(res)
	if err != nil {
		return res, nil
	}
	var se *catalog.SchemaError
	if err := it.ValidateResult(o.Get("structuredContent")); !errors.As(err, &se) {
		return res, nil
	}
	rq.h.metrics.SchemaViolation(rq.view.ID, up.Cfg.Name, telemetry.SchemaOutput)
	// The problems are the upstream's data: logged quoted, so they cannot
	// forge lines, and bounded by the catalog.
	rq.h.log.WarnContext(ctx, "tool result does not match its outputSchema", "tenant", rq.view.ID, "upstream", up.Cfg.Name,
		"tool", strconv.QuoteToASCII(it.Original), "problems", strconv.QuoteToASCII(se.Problems), "mode", mode)
	if mode != config.ValidationEnforce {
		return res, nil
	}
	return nil, rpcerr.FailTool("The result of tool " + strconv.Quote(c.target) + " did not match its output schema, so the gateway withheld it:\n" + se.Problems)
}
