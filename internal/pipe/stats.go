package pipe

// Stats are what a Handler ran, for the operator console: its Conns (a
// stdio upstream's processes) running now and since it was made.
type Stats struct {
	// Running are the Conns running or starting.
	Running int
	// Started are the Conns started, and Exited those that ended by
	// themselves (a process that exited or crashed, a stream that broke),
	// not stopped by the Handler (idle, evicted, closed).
	Started, Exited int64
	// Restarts are the Conns started for a tenant (for all, with
	// isolation shared) after one of its Conns exited: each exit is
	// followed by at most one restart, when a session needs a Conn again.
	Restarts int64
}

// counts keeps a Handler's Stats but Running; its mutex guards it.
type counts struct {
	started, exited, restarts int64
	// unrestarted counts, by tenant, the Conns that exited and were not
	// started again yet: at most one entry per tenant (tenants are
	// configured), none with isolation shared or without a tenant but "".
	unrestarted map[string]int
}

// noteStart counts a Conn of tenant that started.
func (s *counts) noteStart(tenant string) {
	s.started++
	if n := s.unrestarted[tenant]; n > 0 {
		s.restarts++
		if n == 1 {
			delete(s.unrestarted, tenant)
		} else {
			s.unrestarted[tenant] = n - 1
		}
	}
}

// noteExit counts a Conn of tenant that exited by itself.
func (s *counts) noteExit(tenant string) {
	s.exited++
	if s.unrestarted == nil {
		s.unrestarted = make(map[string]int)
	}
	s.unrestarted[tenant]++
}

// Stats returns what the Handler ran.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return Stats{Running: h.pool.n, Started: h.stats.started, Exited: h.stats.exited, Restarts: h.stats.restarts}
}
