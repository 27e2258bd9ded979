package catalog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Refresh fetches again the listings of up that [Catalog.Stale] marked
// (had, and apart those shared within a partition, partitioned), so that
// c tells the clients whose view changed (OnChange) and has the new lists
// ready. fetch lists kind k of up as any caller would (for the watch: on
// its own session, with the gateway's own credentials); the listings of
// partitioned kinds were fetched on sessions that announced other
// capabilities, or with other credentials, so fetch cannot fetch them as
// they were: changed is told of those kinds at once instead, and each
// listing is fetched again when next used. It returns the fetches'
// failures, each naming its list method.
func (c *Catalog) Refresh(ctx context.Context, up *Upstream, had, partitioned []Kind, changed func(Kind), fetch func(ctx context.Context, k Kind, b Bounds) ([]json.RawMessage, bool, error)) error {
	for _, k := range partitioned {
		changed(k)
	}
	var errs []error
	for _, k := range had {
		if slices.Contains(partitioned, k) {
			continue // told already
		}
		_, err := c.Get(ctx, up, k, Scope{}, func(ctx context.Context, b Bounds) ([]json.RawMessage, bool, error) {
			return fetch(ctx, k, b)
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", k.Info().ListMethod, err))
		}
	}
	return errors.Join(errs...)
}
