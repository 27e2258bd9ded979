package session

// Fair shares of a shared pool.
//
// A pool that every tenant shares (the memory store's sessions, the event
// logs' streams and bytes) bounds what one principal and one tenant hold
// of it, and when it is full the heaviest holder loses first: the tenant
// holding the most, and within it the principal holding the most, gives up
// its least recently used entry, so that a newcomer under its share is
// served rather than refused. A caller over its share never takes from
// another: it is refused, or gives up its own oldest entries. So one
// principal filling the pool costs others nothing they hold within their
// shares, and churn (ending entries and opening new ones) never takes from
// anyone, since the pool has room after each end.

// A scale orders holders by weight, heaviest first: an indexed binary
// max-heap, so that the heaviest is found in O(1) and a holder reweighed
// in O(log n). A holder whose weight falls to zero leaves the scale. The
// zero scale is empty and ready to use.
type scale[K comparable] struct {
	heap []*weight[K]
	at   map[K]*weight[K]
}

type weight[K comparable] struct {
	key K
	w   int64
	i   int // index in heap
}

// get returns k's weight, 0 if k holds nothing.
func (s *scale[K]) get(k K) int64 {
	if x := s.at[k]; x != nil {
		return x.w
	}
	return 0
}

// add adds d (which may be negative) to k's weight and returns the new
// weight.
func (s *scale[K]) add(k K, d int64) int64 {
	x := s.at[k]
	if x == nil {
		if d <= 0 {
			return 0
		}
		if s.at == nil {
			s.at = make(map[K]*weight[K])
		}
		x = &weight[K]{key: k, i: len(s.heap)}
		s.at[k] = x
		s.heap = append(s.heap, x)
	}
	x.w += d
	if x.w <= 0 {
		s.remove(x)
		return 0
	}
	if !s.up(x.i) {
		s.down(x.i)
	}
	return x.w
}

// top returns the heaviest holder and its weight; ok is false when the
// scale is empty. Among holders of equal weight, any may be returned.
func (s *scale[K]) top() (k K, w int64, ok bool) {
	if len(s.heap) == 0 {
		return k, 0, false
	}
	return s.heap[0].key, s.heap[0].w, true
}

// len returns the number of holders.
func (s *scale[K]) len() int { return len(s.heap) }

func (s *scale[K]) remove(x *weight[K]) {
	delete(s.at, x.key)
	last := len(s.heap) - 1
	i := x.i
	if i != last {
		s.swap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	if i != last && !s.up(i) {
		s.down(i)
	}
	if len(s.heap) == 0 {
		s.heap = nil // let a burst's backing array go
	}
}

func (s *scale[K]) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.heap[i].i, s.heap[j].i = i, j
}

// up moves the holder at i towards the top while it outweighs its parent,
// and reports whether it moved.
func (s *scale[K]) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].w >= s.heap[i].w {
			break
		}
		s.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (s *scale[K]) down(i int) {
	for n := len(s.heap); ; {
		l := 2*i + 1
		if l >= n {
			return
		}
		c := l
		if r := l + 1; r < n && s.heap[r].w > s.heap[l].w {
			c = r
		}
		if s.heap[i].w >= s.heap[c].w {
			return
		}
		s.swap(i, c)
		i = c
	}
}

// shares is a pool's holdings, per tenant and per principal within each
// tenant.
type shares struct {
	tenants scale[string]
	prins   map[string]*scale[Principal] // by tenant
}

// add adds d to p's holding and to its tenant's.
func (s *shares) add(p Principal, d int64) {
	s.tenants.add(p.Tenant, d)
	ps := s.prins[p.Tenant]
	if ps == nil {
		if d <= 0 {
			return
		}
		if s.prins == nil {
			s.prins = make(map[string]*scale[Principal])
		}
		ps = &scale[Principal]{}
		s.prins[p.Tenant] = ps
	}
	if ps.add(p, d); ps.len() == 0 {
		delete(s.prins, p.Tenant)
	}
}

// principal and tenant return what p, and p's tenant, hold.
func (s *shares) principal(p Principal) int64 { return s.prins[p.Tenant].getOrZero(p) }
func (s *shares) tenant(t string) int64       { return s.tenants.get(t) }

func (s *scale[K]) getOrZero(k K) int64 {
	if s == nil {
		return 0
	}
	return s.get(k)
}

// heaviest returns whom a full pool takes from to make room for a
// newcomer p: the tenant holding the most, and within it the principal
// holding the most. A newcomer whose tenant holds as much as the heaviest
// is its own tenant's loss, and one that holds as much as its tenant's
// heaviest principal is its own: so that it never takes from another
// holding no more than itself. ok is false when the pool is empty.
func (s *shares) heaviest(p Principal) (Principal, bool) {
	t, tw, ok := s.tenants.top()
	if !ok {
		return Principal{}, false
	}
	if s.tenants.get(p.Tenant) >= tw {
		t = p.Tenant
	}
	return s.heaviestOf(t, p)
}

// heaviestOf returns the principal of tenant t holding the most, p if p
// holds as much.
func (s *shares) heaviestOf(t string, p Principal) (Principal, bool) {
	ps := s.prins[t]
	if ps == nil {
		return Principal{}, false
	}
	q, qw, ok := ps.top()
	if !ok {
		return Principal{}, false
	}
	if p.Tenant == t && ps.get(p) >= qw {
		q = p
	}
	return q, true
}
