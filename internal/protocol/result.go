package protocol

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/mcpgw/gateway/internal/jsonx"
)

// A Caching is what a 2026-07-28 result says of its freshness
// (server/utilities/caching): ttlMs and cacheScope. The zero Caching says
// nothing, and the result has neither member.
type Caching struct {
	Scope string        // cacheScope: CachePrivate, or "" for none
	TTL   time.Duration // ttlMs, in whole milliseconds
}

// CachePrivate is the cacheScope of a result that may be kept for its
// caller alone.
const CachePrivate = "private"

// DecorateResult adds to result what every 2026-07-28 result carries:
// resultType "complete" unless it has one, serverInfo (an Implementation
// object) under _meta's MetaServerInfo, the other members of _meta kept,
// and c's ttlMs and cacheScope. A result that is not a valid JSON object
// (see jsonx.ParseValidObject) is returned as it is.
func DecorateResult(result, serverInfo json.RawMessage, c Caching) json.RawMessage {
	o, err := jsonx.ParseValidObject(result)
	if err != nil {
		return result
	}
	if o.Get("resultType") == nil {
		o.SetString("resultType", "complete")
	}
	meta := o.ObjectOr("_meta")
	meta.Set(MetaServerInfo, serverInfo)
	o.Set("_meta", meta.Bytes())
	if c.Scope != "" {
		o.Set("ttlMs", []byte(strconv.FormatInt(c.TTL.Milliseconds(), 10)))
		o.SetString("cacheScope", c.Scope)
	}
	return o.Bytes()
}
