package session

import (
	"encoding/hex"
	"hash/maphash"
)

// Memory finds a record by its id in an idTable rather than a
// map[string]*entry: a Go map slot holds the key's string header beside
// the pointer (24 bytes, some 38 per record at the loads a map runs at),
// while an idTable slot is the entry pointer alone, the id being read from
// the packed record the entry holds. That also lets the packed record
// hold an id NewID made as its 16 bytes rather than its 32 hex digits.
//
// It is an open-addressing table with linear probing, at most 13/16 full,
// that removes by shifting entries back (no tombstones), so that lookups
// stay short however many records come and go. It never shrinks, as Go
// maps do not.

// The first byte of a packed record says how its id is kept.
const (
	idString byte = iota // a string: length, bytes
	idHex                // 16 bytes: NewID's 32 lowercase hex digits, decoded
)

// appendID appends id as a packed record keeps it.
func appendID(b []byte, id string) []byte {
	if raw, ok := hexID(id); ok {
		b = append(b, idHex)
		return append(b, raw[:]...)
	}
	b = append(b, idString)
	return appendString(b, id)
}

// hexID returns the bytes id encodes if it is 32 lowercase hex digits, as
// NewID makes. (Uppercase digits would not come back as they came.)
func hexID(id string) (raw [16]byte, ok bool) {
	if len(id) != 32 {
		return raw, false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return raw, false
		}
	}
	_, err := hex.Decode(raw[:], []byte(id))
	return raw, err == nil
}

// readID returns the id a packed record starts with, as the bytes kept (a
// substring of s) and whether they are hex-decoded, and the rest of s.
func readID(s string) (kept string, isHex bool, rest string) {
	if s[0] == idHex {
		return s[1:17], true, s[17:]
	}
	u := unpacker{s[1:]}
	kept = u.string()
	return kept, false, u.s
}

// packedID returns the id of the packed record s.
func packedID(s string) string {
	kept, isHex, _ := readID(s)
	if isHex {
		return hex.EncodeToString([]byte(kept))
	}
	return kept
}

// idIs reports whether id is the packed record s's, without allocating.
func idIs(s, id string) bool {
	kept, isHex, _ := readID(s)
	if !isHex {
		return kept == id
	}
	if len(id) != 32 {
		return false
	}
	const digits = "0123456789abcdef"
	for i := range 16 {
		c := kept[i]
		if id[2*i] != digits[c>>4] || id[2*i+1] != digits[c&0xf] {
			return false
		}
	}
	return true
}

// idTable holds the store's entries by id. Its zero value is empty and
// ready to use.
type idTable struct {
	seed  maphash.Seed
	slots []*entry // a power of two of them, or none
	n     int
}

// hash returns the hash of id.
func (t *idTable) hash(id string) uint64 {
	return maphash.String(t.seed, id)
}

// hashOf returns the hash of e's id, without allocating.
func (t *idTable) hashOf(e *entry) uint64 {
	kept, isHex, _ := readID(e.rec)
	if !isHex {
		return t.hash(kept)
	}
	var buf [32]byte
	hex.Encode(buf[:], []byte(kept))
	return maphash.Bytes(t.seed, buf[:])
}

// len returns the number of entries held.
func (t *idTable) len() int { return t.n }

// get returns id's entry, nil if there is none.
func (t *idTable) get(id string) *entry {
	if t.n == 0 {
		return nil
	}
	mask := uint64(len(t.slots) - 1)
	for i := t.hash(id) & mask; ; i = (i + 1) & mask {
		e := t.slots[i]
		if e == nil || idIs(e.rec, id) {
			return e
		}
	}
}

// put adds e, whose id the table does not hold.
func (t *idTable) put(e *entry) {
	if (t.n+1)*16 > len(t.slots)*13 {
		t.grow()
	}
	t.place(e)
	t.n++
}

func (t *idTable) place(e *entry) {
	mask := uint64(len(t.slots) - 1)
	i := t.hashOf(e) & mask
	for t.slots[i] != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = e
}

func (t *idTable) grow() {
	old := t.slots
	if old == nil {
		t.seed = maphash.MakeSeed()
	}
	t.slots = make([]*entry, max(2*len(old), 16))
	for _, e := range old {
		if e != nil {
			t.place(e)
		}
	}
}

// remove removes e, which the table holds. The entries after it in its
// run move back, each as far as its home slot allows, so that no lookup
// stops short of one.
func (t *idTable) remove(e *entry) {
	mask := uint64(len(t.slots) - 1)
	i := t.hashOf(e) & mask
	for t.slots[i] != e {
		i = (i + 1) & mask
	}
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		// The entry at j may move to the hole at i if its home slot is
		// not in (i, j], cyclically.
		home := t.hashOf(t.slots[j]) & mask
		if (j-home)&mask >= (j-i)&mask {
			t.slots[i] = t.slots[j]
			i = j
		}
	}
	t.slots[i] = nil
	t.n--
}
