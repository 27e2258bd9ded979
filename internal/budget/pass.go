package budget

import "context"

// Pass lets a request of principal, of tenant, through an upstream's
// circuit breaker b and then its concurrency gate g (either may be nil:
// not configured). It returns what to call when the request ends, with how
// it went, or the refusal of either: a request the gate refuses never
// reached the upstream, and its breaker is told so (Unknown), so that a
// half-open circuit's probe is not held by it.
func Pass(ctx context.Context, g *Gate, b *Breaker, tenant, principal string) (done func(Outcome), err error) {
	var report func(Outcome)
	if b != nil {
		if report, err = b.Allow(); err != nil {
			return nil, err
		}
	}
	var release func()
	if g != nil {
		if release, err = g.Acquire(ctx, tenant, principal); err != nil {
			if report != nil {
				report(Unknown)
			}
			return nil, err
		}
	}
	return func(o Outcome) {
		if release != nil {
			release()
		}
		if report != nil {
			report(o)
		}
	}, nil
}
