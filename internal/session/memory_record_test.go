package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestPackRoundTrip checks that a record comes out of its packed form as
// it went in: ids NewID makes and others, nil and empty raw values, values
// too large to intern, upstreams with and without subscriptions.
func TestPackRoundTrip(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	defer m.Close()
	created := time.Date(2026, 12, 5, 17, 0, 0, 123456789, time.UTC)
	large := json.RawMessage(`{"pad":"` + strings.Repeat("x", 2*maxInternBytes) + `"}`)
	for _, r := range []*Record{
		{ID: NewID(), ProtocolVersion: "2025-11-25", Created: created},
		{ID: strings.ToUpper(NewID()), ClientInfo: json.RawMessage{}, ClientCapabilities: json.RawMessage(`{}`), Created: created.Local()},
		{ID: "x", Created: time.Time{}},
		{ID: "stateless-" + NewID(), ProtocolVersion: "2025-06-18", ClientInfo: large, Created: created,
			Upstreams: map[string]Upstream{
				"a": {SessionID: "up-0000000000000000000000000001", ProtocolVersion: "2025-11-25",
					Capabilities: json.RawMessage(`{"tools":{}}`), Listen: true, Subscribed: []string{"file:///a", ""}},
				"b": {Capabilities: json.RawMessage{}},
				"":  {SessionID: strings.Repeat("s", 300), Capabilities: large},
			}},
	} {
		s := m.pack(r, r.Created)
		got := m.record(s)
		if !got.Created.Equal(r.Created) || got.Created.Location() != r.Created.Location() {
			t.Errorf("%s: Created = %v, want %v", r.ID, got.Created, r.Created)
		}
		got.Created = r.Created
		if !reflect.DeepEqual(got, r) {
			t.Errorf("record after packing:\n got %#v\nwant %#v", got, r)
		}
		if len(got.ClientInfo) > 0 && &got.ClientInfo[0] == &r.ClientInfo[0] {
			t.Errorf("%s: ClientInfo shares memory with the record packed", r.ID)
		}
		if id := packedID(s); id != r.ID || !idIs(s, r.ID) || idIs(s, r.ID+"0") {
			t.Errorf("packed id %q, want %q", id, r.ID)
		}
		m.release(s)
	}
	if n := m.internedLen(); n != 0 {
		t.Errorf("%d values interned after every packed record was released, want 0", n)
	}
}

// TestPackedSize keeps the packed form of a typical session (an id from
// NewID, one upstream session with a 32-character id) within the 80-byte
// allocation that TestIdleSessions's figures rest on.
func TestPackedSize(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	defer m.Close()
	r := &Record{
		ID: NewID(), ProtocolVersion: "2025-11-25",
		ClientInfo: json.RawMessage(`{"name":"c","version":"1"}`), ClientCapabilities: json.RawMessage(`{}`),
		Upstreams: map[string]Upstream{"up": {
			SessionID: "up-00000000000000000000000000001", ProtocolVersion: "2025-11-25",
			Capabilities: json.RawMessage(`{"tools":{"listChanged":true}}`),
		}},
	}
	if s := m.pack(r, time.Now()); len(s) > 80 {
		t.Errorf("packed record is %d bytes, want at most 80", len(s))
	}
}

// TestIDTable checks the table of entries against a map through many puts
// and removes, among which removes from the middle of runs.
func TestIDTable(t *testing.T) {
	var tab idTable
	want := map[string]*entry{}
	rnd := rand.New(rand.NewPCG(1, 2))
	check := func() {
		t.Helper()
		if tab.len() != len(want) {
			t.Fatalf("len = %d, want %d", tab.len(), len(want))
		}
		for id, e := range want {
			if got := tab.get(id); got != e {
				t.Fatalf("get(%q) = %p, want %p", id, got, e)
			}
		}
	}
	var ids []string
	for round := range 3 {
		for i := range 3000 {
			id := NewID()
			if i%3 == 0 {
				id = fmt.Sprintf("id-%d-%d", round, i)
			}
			e := &entry{rec: pack(&packed{id: id})}
			tab.put(e)
			want[id] = e
			ids = append(ids, id)
		}
		check()
		rnd.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		for i, id := range ids[:len(ids)*2/3] {
			tab.remove(want[id])
			delete(want, id)
			if tab.get(id) != nil {
				t.Fatalf("get(%q) after its removal found it", id)
			}
			if i%500 == 0 {
				check()
			}
		}
		ids = ids[len(ids)*2/3:]
		check()
	}
	if tab.get("unknown") != nil || tab.get(NewID()) != nil {
		t.Error("get of an unknown id found an entry")
	}
}

// TestInternSlots checks that the intern table reuses the slots of the
// values it forgot, and lets them all go once it holds none.
func TestInternSlots(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	defer m.Close()
	keep := m.internString("kept")
	for i := range 100 {
		r := m.internString(fmt.Sprint(i))
		if internedValue(m, r) != fmt.Sprint(i) {
			t.Fatalf("interned %q, got back %q", fmt.Sprint(i), internedValue(m, r))
		}
		m.unintern(r)
	}
	if n := len(m.values); n != 2 {
		t.Errorf("%d slots after interning values one at a time, want 2", n)
	}
	again := m.internString("kept")
	if again != keep {
		t.Errorf("interning a held value again gave %+v, want %+v", again, keep)
	}
	m.unintern(keep)
	if internedValue(m, again) != "kept" {
		t.Error("a value went while a reference to it was held")
	}
	m.unintern(again)
	if m.values != nil || m.internedLen() != 0 {
		t.Errorf("%d slots and %d values left after every reference was dropped, want none", len(m.values), m.internedLen())
	}
}

// internedValue returns the value r refers to.
func internedValue(m *Memory, r rawRef) string {
	return m.resolveRefs(nil, r)[0]
}

// TestMemoryGetWhileReplaced gets records while other goroutines delete
// and recreate them with other interned values, so that the slots of the
// values a Get is copying out are freed and reused: every record a Get
// returns must hold its own values, never another record's.
func TestMemoryGetWhileReplaced(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	defer m.Close()
	ctx := t.Context()
	const records, rounds = 16, 2000
	rec := func(i, gen int) *Record {
		v := fmt.Sprintf(`{"id":%d,"gen":%d}`, i, gen)
		return &Record{
			ID: fmt.Sprint("r", i), ProtocolVersion: fmt.Sprint("v", i),
			ClientInfo: json.RawMessage(v),
			Upstreams:  map[string]Upstream{"up": {ProtocolVersion: fmt.Sprint("v", i), Capabilities: json.RawMessage(v)}},
		}
	}
	for i := range records {
		if err := m.Create(ctx, rec(i, 0)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for gen := 1; gen <= rounds; gen++ {
			i := gen % records
			if err := m.Delete(ctx, fmt.Sprint("r", i)); err != nil {
				t.Error(err)
				return
			}
			if err := m.Create(ctx, rec(i, gen)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for n := 0; ; n++ {
		select {
		case <-done:
			return
		default:
		}
		i := n % records
		r, err := m.Get(ctx, fmt.Sprint("r", i))
		if errors.Is(err, ErrNotFound) {
			continue // between the Delete and the Create
		}
		if err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf(`{"id":%d,`, i)
		u := r.Upstreams["up"]
		if r.ProtocolVersion != fmt.Sprint("v", i) || u.ProtocolVersion != r.ProtocolVersion ||
			!strings.HasPrefix(string(r.ClientInfo), prefix) || string(u.Capabilities) != string(r.ClientInfo) {
			t.Fatalf("Get(r%d) = version %q, info %s, upstream %q %s: another record's values", i, r.ProtocolVersion, r.ClientInfo, u.ProtocolVersion, u.Capabilities)
		}
	}
}
