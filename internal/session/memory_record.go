package session

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// How Memory keeps a record: packed into one string, so that a replica
// holds many idle sessions (100,000 in under 96 MiB of RSS, issue 33).
//
// A struct of the record's fields, with a slice of upstreams, costs some
// 400 bytes in four allocations for a session with one upstream, more
// with the strings it keeps of the request and of the upstream's response
// (it was 591 bytes of live heap per session in TestIdleSessions, map slot
// and list entry included). Packed, the same session is one allocation of
// 80 bytes (72 used): the id (as 16 bytes if NewID made it) and the upstream session
// ids are copied in, length-prefixed, and the strings they came from (the
// request's and the upstream response's) are let go. What every session
// shares stays out of it: the principal is kept once per principal (in its
// list's sentinel, prinRoot), and the protocol versions and small raw JSON
// members (client info and capabilities, upstream capabilities), which
// most sessions share with many others, are interned and referred to by
// their index in the table.
//
// A packed string is never modified: SetUpstream packs a new one. The
// table of records by id (idTable) reads the id from it, so the id is held
// once.
//
// The layout, in order, with every integer an unsigned varint unless said
// otherwise:
//
//	id                                    see appendID
//	protocol version                      raw value (below)
//	created                               seconds (signed varint), nanoseconds, zone (0 local, 1 UTC)
//	client info, client capabilities      raw values (below)
//	number of upstreams, then for each:
//	  name, session id                    strings
//	  protocol version, capabilities      raw values
//	  listen                              0 or 1
//	  number of subscribed URIs, then each URI as a string
//
// A raw value is 0 for nil, 1 followed by a string for a value held in the
// packed string itself (empty, too large to intern, or the table full), or
// 2+i for the interned value at index i. A protocol version is never
// nil: "" is held inline. Created comes back as the same instant, in UTC
// if it was in UTC and in local time otherwise, without a monotonic
// clock reading (which the Redis store, keeping records as JSON, drops
// too).

// packed is a record's stored form, unpacked: its raw values are still
// references into the intern table (or the packed string), not copies.
type packed struct {
	id                  string
	version, info, caps rawRef
	created             time.Time
	ups                 []packedUpstream
}

type packedUpstream struct {
	name, sessionID string
	version, caps   rawRef
	listen          bool
	subscribed      []string
}

// rawRef is a raw JSON value of a packed record: nil, held inline (s), or
// interned (index idx).
type rawRef struct {
	kind uint8
	idx  uint32
	s    string
}

const (
	rawNil uint8 = iota
	rawInline
	rawInterned
)

// pack returns p's packed string. It packs into a buffer on the stack
// when p fits, so that the string is the one allocation.
func pack(p *packed) string {
	var buf [256]byte
	b := buf[:0]
	if n := packedSize(p); n > len(buf) {
		b = make([]byte, 0, n)
	}
	b = appendID(b, p.id)
	b = appendRaw(b, p.version)
	b = binary.AppendVarint(b, p.created.Unix())
	b = binary.AppendUvarint(b, uint64(p.created.Nanosecond()))
	zone := uint64(0)
	if p.created.Location() == time.UTC {
		zone = 1
	}
	b = binary.AppendUvarint(b, zone)
	b = appendRaw(b, p.info)
	b = appendRaw(b, p.caps)
	b = binary.AppendUvarint(b, uint64(len(p.ups)))
	for i := range p.ups {
		u := &p.ups[i]
		b = appendString(b, u.name)
		b = appendString(b, u.sessionID)
		b = appendRaw(b, u.version)
		b = appendRaw(b, u.caps)
		listen := uint64(0)
		if u.listen {
			listen = 1
		}
		b = binary.AppendUvarint(b, listen)
		b = binary.AppendUvarint(b, uint64(len(u.subscribed)))
		for _, s := range u.subscribed {
			b = appendString(b, s)
		}
	}
	return string(b)
}

// packedSize returns an upper bound of the length of p's packed string, so
// that pack never grows its buffer.
func packedSize(p *packed) int {
	n := 1 + 5*binary.MaxVarintLen64 + 3*rawSize + len(p.id) + len(p.version.s) + len(p.info.s) + len(p.caps.s)
	for _, u := range p.ups {
		n += 4*binary.MaxVarintLen64 + 2*rawSize + len(u.name) + len(u.sessionID) + len(u.version.s) + len(u.caps.s)
		for _, s := range u.subscribed {
			n += binary.MaxVarintLen64 + len(s)
		}
	}
	return n
}

// rawSize bounds a raw value's prefix: its kind or index, and a length.
const rawSize = 2 * binary.MaxVarintLen64

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendRaw(b []byte, r rawRef) []byte {
	switch r.kind {
	case rawNil:
		return binary.AppendUvarint(b, 0)
	case rawInline:
		b = binary.AppendUvarint(b, 1)
		return appendString(b, r.s)
	default:
		return binary.AppendUvarint(b, 2+uint64(r.idx))
	}
}

// unpacker reads a packed string. A packed string is only ever made by
// pack, so a malformed one is a bug: reading past its end panics.
type unpacker struct {
	s string
}

func (u *unpacker) uint() uint64 {
	v, n := uvarint(u.s)
	u.s = u.s[n:]
	return v
}

func (u *unpacker) int() int64 {
	x := u.uint()
	return int64(x>>1) ^ -int64(x&1) // zigzag, as binary.AppendVarint writes
}

// string returns the next string: a substring of the packed string, not a
// copy (strings are immutable, and the packed string is never modified).
func (u *unpacker) string() string {
	n := u.uint()
	s := u.s[:n]
	u.s = u.s[n:]
	return s
}

func (u *unpacker) raw() rawRef {
	switch k := u.uint(); k {
	case 0:
		return rawRef{}
	case 1:
		return rawRef{kind: rawInline, s: u.string()}
	default:
		return rawRef{kind: rawInterned, idx: uint32(k - 2)}
	}
}

// uvarint is binary.Uvarint for a string, without converting it.
func uvarint(s string) (uint64, int) {
	var x uint64
	var shift uint
	for i := 0; ; i++ {
		c := s[i]
		if c < 0x80 {
			return x | uint64(c)<<shift, i + 1
		}
		x |= uint64(c&0x7f) << shift
		shift += 7
	}
}

// unpack returns the parts of a packed string. Its strings are substrings
// of s, but for an id kept as bytes.
func unpack(s string) packed {
	var p packed
	p.id = packedID(s)
	_, _, rest := readID(s)
	u := unpacker{rest}
	p.version = u.raw()
	sec := u.int()
	nsec := int64(u.uint())
	p.created = time.Unix(sec, nsec)
	if u.uint() == 1 {
		p.created = p.created.UTC()
	}
	p.info = u.raw()
	p.caps = u.raw()
	if n := u.uint(); n > 0 {
		p.ups = make([]packedUpstream, n)
		for i := range p.ups {
			up := &p.ups[i]
			up.name = u.string()
			up.sessionID = u.string()
			up.version = u.raw()
			up.caps = u.raw()
			up.listen = u.uint() == 1
			if k := u.uint(); k > 0 {
				up.subscribed = make([]string, k)
				for j := range up.subscribed {
					up.subscribed[j] = u.string()
				}
			}
		}
	}
	return p
}

// upstream returns the index of the upstream named name, -1 if p has none.
func (p *packed) upstream(name string) int {
	for i := range p.ups {
		if p.ups[i].name == name {
			return i
		}
	}
	return -1
}

// pack returns the stored form of r, created at created, interning its small raw values: it
// shares no memory with r. Every interned reference it takes must be
// dropped by release when the packed string goes.
func (m *Memory) pack(r *Record, created time.Time) string {
	p := packed{
		id: r.ID, version: m.internString(r.ProtocolVersion), created: created,
		info: m.intern(r.ClientInfo), caps: m.intern(r.ClientCapabilities),
	}
	if len(r.Upstreams) > 0 {
		p.ups = make([]packedUpstream, 0, len(r.Upstreams))
		for name, u := range r.Upstreams {
			p.ups = append(p.ups, m.packUpstream(name, u))
		}
	}
	return pack(&p)
}

// packUpstream returns u's stored form, interning its protocol version and
// capabilities.
func (m *Memory) packUpstream(name string, u Upstream) packedUpstream {
	return packedUpstream{
		name: name, sessionID: u.SessionID, version: m.internString(u.ProtocolVersion),
		caps: m.intern(u.Capabilities), listen: u.Listen, subscribed: u.Subscribed,
	}
}

// record returns a new Record for the packed string s: it shares no
// mutable memory with the store. The interned values s refers to must
// still be held, by s's entry or by the caller (see reportExpired).
func (m *Memory) record(s string) *Record {
	var buf [8]string
	return recordOf(s, m.resolve(s, buf[:0]))
}

// resolve appends the interned values the packed string s refers to, in
// the order of its layout, to dst. It does not allocate unless dst is too
// short, so that Get calls it under the store's lock (as it must: the
// values' slots may be reused once the record goes) and copies the record
// out after releasing it. The values' strings are never modified: they
// stay valid after the table forgets them.
func (m *Memory) resolve(s string, dst []string) []string {
	m.imu.Lock()
	defer m.imu.Unlock()
	add := func(r rawRef) {
		if r.kind == rawInterned {
			dst = append(dst, m.values[r.idx].s)
		}
	}
	_, _, rest := readID(s)
	u := unpacker{rest}
	add(u.raw()) // protocol version
	u.int()      // created
	u.uint()
	u.uint()
	add(u.raw()) // client info
	add(u.raw()) // client capabilities
	for n := u.uint(); n > 0; n-- {
		u.string() // name
		u.string() // session id
		add(u.raw())
		add(u.raw())
		u.uint() // listen
		for k := u.uint(); k > 0; k-- {
			u.string()
		}
	}
	return dst
}

// resolveRefs is resolve for some raw values of a packed record.
func (m *Memory) resolveRefs(dst []string, refs ...rawRef) []string {
	m.imu.Lock()
	defer m.imu.Unlock()
	for _, r := range refs {
		if r.kind == rawInterned {
			dst = append(dst, m.values[r.idx].s)
		}
	}
	return dst
}

// recordOf returns a new Record for the packed string s, whose interned
// values resolve returned as vals.
func recordOf(s string, vals []string) *Record {
	p := unpack(s)
	res := resolver{vals}
	// One statement per value: res hands them out in the layout's order.
	r := &Record{ID: p.id, Created: p.created}
	r.ProtocolVersion = res.str(p.version)
	r.ClientInfo = res.raw(p.info)
	r.ClientCapabilities = res.raw(p.caps)
	if p.ups != nil {
		r.Upstreams = make(map[string]Upstream, len(p.ups))
		for _, u := range p.ups {
			r.Upstreams[u.name] = res.upstream(u)
		}
	}
	return r
}

// resolver copies a packed record's values out, taking its interned values
// from vals in order.
type resolver struct {
	vals []string
}

func (res *resolver) str(r rawRef) string {
	if r.kind != rawInterned {
		return r.s // a substring of the packed string: strings are immutable
	}
	s := res.vals[0]
	res.vals = res.vals[1:]
	return s
}

func (res *resolver) raw(r rawRef) []byte {
	switch r.kind {
	case rawNil:
		return nil
	case rawInline:
		return append([]byte{}, r.s...) // empty but not nil, as stored
	default:
		return []byte(res.str(r))
	}
}

// upstream returns u as an Upstream of the caller's own.
func (res *resolver) upstream(u packedUpstream) Upstream {
	out := Upstream{SessionID: u.sessionID, Listen: u.listen, Subscribed: slices.Clone(u.subscribed)}
	out.ProtocolVersion = res.str(u.version)
	out.Capabilities = res.raw(u.caps)
	return out
}

// The intern table's bounds. Clients choose their info and capabilities, so
// a value is only worth sharing if it is small (the common clients' are a
// few hundred bytes), and the table holds only so many; a value beyond
// either is copied into its record alone, and goes with the record. So the
// table holds at most maxInterned × maxInternBytes bytes, and only values
// that live records hold.
const (
	maxInterned    = 10_000
	maxInternBytes = 1 << 10
)

// internValue is one interned value and the references live records hold
// to it; a free slot has refs 0.
type internValue struct {
	s    string
	refs int
}

// intern returns a reference to b: to a value shared with every other
// record holding the same bytes, or to a copy held inline if b is too
// large to share or the table is full. Every reference intern returns must
// be passed to unintern exactly once when the record holding it goes.
//
// A reference to a value held inline is a view of b, not a copy: it must
// be packed before b can change (the caller's b never changes during the
// store call that packs it).
func (m *Memory) intern(b []byte) rawRef {
	if b == nil {
		return rawRef{}
	}
	return m.internString(unsafe.String(unsafe.SliceData(b), len(b)))
}

// internString is intern for a string, which is never nil: "" is held
// inline.
func (m *Memory) internString(s string) rawRef {
	if len(s) == 0 || len(s) > maxInternBytes {
		return rawRef{kind: rawInline, s: s}
	}
	m.imu.Lock()
	defer m.imu.Unlock()
	if i, ok := m.interned[s]; ok {
		m.values[i].refs++
		return rawRef{kind: rawInterned, idx: i}
	}
	if len(m.interned) >= maxInterned {
		return rawRef{kind: rawInline, s: s}
	}
	if m.interned == nil {
		m.interned = make(map[string]uint32)
	}
	var i uint32
	if n := len(m.free); n > 0 {
		i, m.free = m.free[n-1], m.free[:n-1]
	} else {
		i = uint32(len(m.values))
		m.values = append(m.values, internValue{})
	}
	v := &m.values[i]
	v.s, v.refs = strings.Clone(s), 1 // s may be a view of a caller's bytes
	m.interned[v.s] = i
	return rawRef{kind: rawInterned, idx: i}
}

// unintern drops a reference intern returned; once a value has none left,
// the table forgets it and its slot is free for another value.
func (m *Memory) unintern(r rawRef) {
	if r.kind != rawInterned {
		return
	}
	m.imu.Lock()
	defer m.imu.Unlock()
	v := &m.values[r.idx]
	if v.refs--; v.refs > 0 {
		return
	}
	delete(m.interned, v.s)
	v.s = ""
	m.free = append(m.free, r.idx)
	if len(m.free) == len(m.values) { // let a burst's slots go
		m.values, m.free = nil, nil
	}
}

// release drops the interned references the packed string s holds.
func (m *Memory) release(s string) {
	p := unpack(s)
	m.unintern(p.version)
	m.unintern(p.info)
	m.unintern(p.caps)
	for _, u := range p.ups {
		m.releaseUpstream(u)
	}
}

// releaseUpstream drops the interned references u holds.
func (m *Memory) releaseUpstream(u packedUpstream) {
	m.unintern(u.version)
	m.unintern(u.caps)
}

// internedLen returns the number of values interned, for tests.
func (m *Memory) internedLen() int {
	m.imu.Lock()
	defer m.imu.Unlock()
	return len(m.interned)
}

func cloneUpstream(u Upstream) Upstream {
	u.Capabilities = bytes.Clone(u.Capabilities)
	u.Subscribed = slices.Clone(u.Subscribed)
	return u
}
