package auth

import (
	"container/list"
	"sync"
	"time"
)

// maxCacheAge bounds how long a verified token is served from the cache:
// long enough to spare nearly every signature check of an active client,
// short enough that a key the IdP withdrew stops working soon after.
const maxCacheAge = 5 * time.Minute

// tokenCache is a bounded LRU of verified tokens, keyed by the token's
// SHA-256 so that the cache never holds a token. It is safe for concurrent
// use.
type tokenCache struct {
	max int

	mu    sync.Mutex
	ll    *list.List // of *cacheEntry, most recently used first
	items map[[32]byte]*list.Element
}

type cacheEntry struct {
	key     [32]byte
	p       *Principal
	expiry  time.Time // the token's exp
	evictAt time.Time // when the entry stops being served regardless of exp
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, ll: list.New(), items: make(map[[32]byte]*list.Element)}
}

// get returns the entry for key, if there is one that is not past evictAt.
func (c *tokenCache) get(key [32]byte, now time.Time) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return cacheEntry{}, false
	}
	e := el.Value.(*cacheEntry)
	if !now.Before(e.evictAt) {
		c.removeElement(el)
		return cacheEntry{}, false
	}
	c.ll.MoveToFront(el)
	return *e, true
}

// add caches p for key, evicting the least recently used entry when full.
func (c *tokenCache) add(key [32]byte, p *Principal, expiry, evictAt time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*cacheEntry)
		e.p, e.expiry, e.evictAt = p, expiry, evictAt
		c.ll.MoveToFront(el)
		return
	}
	c.items[key] = c.ll.PushFront(&cacheEntry{key: key, p: p, expiry: expiry, evictAt: evictAt})
	for c.ll.Len() > c.max {
		c.removeElement(c.ll.Back())
	}
}

func (c *tokenCache) remove(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.removeElement(el)
	}
}

func (c *tokenCache) removeElement(el *list.Element) {
	c.ll.Remove(el)
	delete(c.items, el.Value.(*cacheEntry).key)
}

func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}
