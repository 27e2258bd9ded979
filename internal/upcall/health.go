package upcall

import "sync"

// Health is how the last request to each upstream went, for readiness
// and the console: a gateway none of whose upstreams answers is not
// ready. Its zero value knows of no request; its methods may be called
// concurrently.
type Health struct {
	mu   sync.Mutex
	last map[string]error // upstream → its last request's error
}

// Note records how the last request to upstream name went (nil: it
// answered).
func (h *Health) Note(name string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.last == nil {
		h.last = make(map[string]error)
	}
	h.last[name] = err
}

// Last returns how the last request to upstream name went, and whether
// one was sent.
func (h *Health) Last(name string) (err error, tried bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, tried = h.last[name]
	return err, tried
}

// Problems returns, when each of names was tried and failed on its last
// request, one line per upstream; nil when at least one answers (or one
// was not tried yet).
func (h *Health) Problems(names []string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var problems []string
	for _, name := range names {
		err, tried := h.last[name]
		if !tried || err == nil {
			return nil
		}
		problems = append(problems, "upstream "+name+": "+err.Error())
	}
	return problems
}
