// Package sessiontest is a conformance suite for [session.Store]
// implementations, so that every backend (memory, Redis) is held to the same
// contract.
package sessiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcpgw/gateway/internal/session"
)

// Run runs the conformance suite. newStore must return a new, empty store
// whose records live for at least a minute; it may register cleanup with
// t.Cleanup. The suite uses only ids from [session.NewID], so stores may be
// shared between subtests.
func Run(t *testing.T, newStore func(t *testing.T) session.Store) {
	tests := []struct {
		name string
		f    func(t *testing.T, s session.Store)
	}{
		{"CreateGet", testCreateGet},
		{"CreateSetsTimes", testCreateSetsTimes},
		{"CreateDuplicate", testCreateDuplicate},
		{"GetUnknown", testGetUnknown},
		{"Delete", testDelete},
		{"DeleteUnknown", testDeleteUnknown},
		{"SetUpstream", testSetUpstream},
		{"SetUpstreamUnknown", testSetUpstreamUnknown},
		{"SetUpstreamConcurrent", testSetUpstreamConcurrent},
		{"Isolation", testIsolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.f(t, newStore(t))
		})
	}
}

// recordOpts compare records as a store must preserve them. LastSeen is the
// store's to set; empty and nil maps and RawMessages may not survive
// serialization apart.
var recordOpts = cmp.Options{
	cmpopts.IgnoreFields(session.Record{}, "LastSeen"),
	cmpopts.EquateEmpty(),
}

// newRecord returns a record with every field set. Its JSON is compact, as a
// store that serializes records may compact it.
func newRecord() *session.Record {
	return &session.Record{
		ID:                 session.NewID(),
		ProtocolVersion:    "2025-06-18",
		ClientInfo:         json.RawMessage(`{"name":"test-client","version":"1.2.3"}`),
		ClientCapabilities: json.RawMessage(`{"roots":{"listChanged":true},"sampling":{}}`),
		Principal:          session.Principal{Issuer: "https://issuer.example", Subject: "alice", Tenant: "acme"},
		Upstreams: map[string]session.Upstream{
			"github": {
				SessionID:       "gh-1",
				ProtocolVersion: "2025-03-26",
				Capabilities:    json.RawMessage(`{"tools":{"listChanged":true}}`),
			},
			"stateless": {ProtocolVersion: "2025-06-18"},
		},
		// Whole seconds in UTC, so any time encoding round-trips it.
		Created: time.Date(2025, 7, 1, 12, 0, 0, 0, time.UTC),
	}
}

func create(t *testing.T, s session.Store, r *session.Record) {
	t.Helper()
	if err := s.Create(t.Context(), r); err != nil {
		t.Fatalf("Create(%q): %v", r.ID, err)
	}
}

func get(t *testing.T, s session.Store, id string) *session.Record {
	t.Helper()
	got, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return got
}

func testCreateGet(t *testing.T, s session.Store) {
	want := newRecord()
	create(t, s, want)
	got := get(t, s, want.ID)
	if diff := cmp.Diff(want, got, recordOpts); diff != "" {
		t.Errorf("Get after Create mismatch (-want +got):\n%s", diff)
	}
	if got.LastSeen.IsZero() {
		t.Error("Get: LastSeen is zero")
	}

	// A record with only an id round-trips too.
	minimal := &session.Record{ID: session.NewID(), Created: want.Created}
	create(t, s, minimal)
	if diff := cmp.Diff(minimal, get(t, s, minimal.ID), recordOpts); diff != "" {
		t.Errorf("Get of minimal record mismatch (-want +got):\n%s", diff)
	}
}

func testCreateSetsTimes(t *testing.T, s session.Store) {
	r := newRecord()
	r.Created = time.Time{}
	create(t, s, r)
	got := get(t, s, r.ID)
	if got.Created.IsZero() {
		t.Error("Created is zero; want it set by Create")
	}
	if got.LastSeen.Before(got.Created) {
		t.Errorf("LastSeen %v is before Created %v", got.LastSeen, got.Created)
	}
	again := get(t, s, r.ID)
	if again.LastSeen.Before(got.LastSeen) {
		t.Errorf("LastSeen went back from %v to %v", got.LastSeen, again.LastSeen)
	}
}

func testCreateDuplicate(t *testing.T, s session.Store) {
	first := newRecord()
	create(t, s, first)
	second := newRecord()
	second.ID = first.ID
	second.Principal.Subject = "mallory"
	if err := s.Create(t.Context(), second); !errors.Is(err, session.ErrExists) {
		t.Fatalf("Create of duplicate id: got %v, want %v", err, session.ErrExists)
	}
	if diff := cmp.Diff(first, get(t, s, first.ID), recordOpts); diff != "" {
		t.Errorf("duplicate Create changed the record (-want +got):\n%s", diff)
	}
}

func testGetUnknown(t *testing.T, s session.Store) {
	got, err := s.Get(t.Context(), session.NewID())
	if !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("Get(unknown): got %v, want %v", err, session.ErrNotFound)
	}
	if got != nil {
		t.Errorf("Get(unknown) returned a record: %+v", got)
	}
}

func testDelete(t *testing.T, s session.Store) {
	r, other := newRecord(), newRecord()
	create(t, s, r)
	create(t, s, other)
	if err := s.Delete(t.Context(), r.ID); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := s.Get(t.Context(), r.ID); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get after Delete: got %v, want %v", err, session.ErrNotFound)
	}
	get(t, s, other.ID) // untouched
	// The id is free again.
	create(t, s, r)
	get(t, s, r.ID)
}

func testDeleteUnknown(t *testing.T, s session.Store) {
	if err := s.Delete(t.Context(), session.NewID()); err != nil {
		t.Errorf("Delete(unknown): %v", err)
	}
}

func testSetUpstream(t *testing.T, s session.Store) {
	r := newRecord()
	create(t, s, r)
	want := cloneRecord(r)

	caps := json.RawMessage(`{"tools":{}}`)
	// Each step runs against the state the steps before it left.
	steps := []struct {
		name     string
		upstream string
		prev     string
		u        session.Upstream
		wantErr  error
		wantRet  session.Upstream
	}{
		{
			name:     "missing entry, prev empty",
			upstream: "new",
			u:        session.Upstream{SessionID: "n-1", ProtocolVersion: "2025-06-18", Capabilities: caps},
			wantRet:  session.Upstream{SessionID: "n-1", ProtocolVersion: "2025-06-18", Capabilities: caps},
		},
		{
			name:     "missing entry, prev set",
			upstream: "absent",
			prev:     "x",
			u:        session.Upstream{SessionID: "a-1"},
			wantErr:  session.ErrConflict,
			wantRet:  session.Upstream{},
		},
		{
			name:     "prev mismatch",
			upstream: "github",
			prev:     "gh-0",
			u:        session.Upstream{SessionID: "gh-2"},
			wantErr:  session.ErrConflict,
			wantRet:  r.Upstreams["github"],
		},
		{
			name:     "prev empty, entry has session",
			upstream: "github",
			u:        session.Upstream{SessionID: "gh-2"},
			wantErr:  session.ErrConflict,
			wantRet:  r.Upstreams["github"],
		},
		{
			name:     "prev matches",
			upstream: "github",
			prev:     "gh-1",
			u:        session.Upstream{SessionID: "gh-2", ProtocolVersion: "2025-06-18"},
			wantRet:  session.Upstream{SessionID: "gh-2", ProtocolVersion: "2025-06-18"},
		},
		{
			name:     "old prev after replace",
			upstream: "github",
			prev:     "gh-1",
			u:        session.Upstream{SessionID: "gh-3"},
			wantErr:  session.ErrConflict,
			wantRet:  session.Upstream{SessionID: "gh-2", ProtocolVersion: "2025-06-18"},
		},
		{
			name:     "prev empty, entry without session",
			upstream: "stateless",
			u:        session.Upstream{SessionID: "s-1"},
			wantRet:  session.Upstream{SessionID: "s-1"},
		},
		{
			name:     "clear session id",
			upstream: "new",
			prev:     "n-1",
			u:        session.Upstream{ProtocolVersion: "2025-06-18"},
			wantRet:  session.Upstream{ProtocolVersion: "2025-06-18"},
		},
	}
	for _, st := range steps {
		ret, err := s.SetUpstream(t.Context(), r.ID, st.upstream, st.prev, st.u)
		if !errors.Is(err, st.wantErr) {
			t.Fatalf("%s: SetUpstream(%q, prev %q): got error %v, want %v", st.name, st.upstream, st.prev, err, st.wantErr)
		}
		if diff := cmp.Diff(st.wantRet, ret, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: SetUpstream returned mismatch (-want +got):\n%s", st.name, diff)
		}
		if st.wantErr == nil {
			if want.Upstreams == nil {
				want.Upstreams = map[string]session.Upstream{}
			}
			want.Upstreams[st.upstream] = st.u
		}
		// Only the named upstream changes, and only on success.
		if diff := cmp.Diff(want, get(t, s, r.ID), recordOpts); diff != "" {
			t.Errorf("%s: record after SetUpstream mismatch (-want +got):\n%s", st.name, diff)
		}
	}
}

func testSetUpstreamUnknown(t *testing.T, s session.Store) {
	id := session.NewID()
	_, err := s.SetUpstream(t.Context(), id, "github", "", session.Upstream{SessionID: "gh-1"})
	if !errors.Is(err, session.ErrNotFound) {
		t.Fatalf("SetUpstream(unknown): got %v, want %v", err, session.ErrNotFound)
	}
	// It must not have created the session.
	if _, err := s.Get(t.Context(), id); !errors.Is(err, session.ErrNotFound) {
		t.Errorf("Get after SetUpstream(unknown): got %v, want %v", err, session.ErrNotFound)
	}
}

func testSetUpstreamConcurrent(t *testing.T, s session.Store) {
	const n = 16
	r := newRecord()
	create(t, s, r)

	type result struct {
		tried session.Upstream
		ret   session.Upstream
		err   error
	}
	results := make([]result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			u := session.Upstream{SessionID: fmt.Sprintf("race-%d", i), ProtocolVersion: "2025-06-18"}
			<-start
			ret, err := s.SetUpstream(t.Context(), r.ID, "racy", "", u)
			results[i] = result{u, ret, err}
		})
	}
	close(start)
	wg.Wait()

	var winners []session.Upstream
	for _, res := range results {
		switch {
		case res.err == nil:
			winners = append(winners, res.tried)
		case !errors.Is(res.err, session.ErrConflict):
			t.Errorf("SetUpstream(%q): unexpected error %v", res.tried.SessionID, res.err)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("%d SetUpstream calls succeeded, want exactly 1: %v", len(winners), winners)
	}
	winner := winners[0]
	for _, res := range results {
		if res.err == nil {
			continue
		}
		if diff := cmp.Diff(winner, res.ret, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("loser %q got current entry mismatch (-want +got):\n%s", res.tried.SessionID, diff)
		}
	}
	got := get(t, s, r.ID).Upstreams["racy"]
	if diff := cmp.Diff(winner, got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("stored entry mismatch (-want +got):\n%s", diff)
	}
}

func testIsolation(t *testing.T, s session.Store) {
	in := newRecord()
	want := cloneRecord(in)
	create(t, s, in)
	check := func(when string) {
		t.Helper()
		if diff := cmp.Diff(want, get(t, s, want.ID), recordOpts); diff != "" {
			t.Errorf("record changed after %s (-want +got):\n%s", when, diff)
		}
	}

	scribble(in)
	check("mutating the record passed to Create")

	scribble(get(t, s, want.ID))
	check("mutating a record returned by Get")

	caps := json.RawMessage(`{"tools":{}}`)
	u := session.Upstream{SessionID: "n-1", Capabilities: caps}
	ret, err := s.SetUpstream(t.Context(), want.ID, "new", "", u)
	if err != nil {
		t.Fatalf("SetUpstream: %v", err)
	}
	want.Upstreams["new"] = session.Upstream{SessionID: "n-1", Capabilities: json.RawMessage(`{"tools":{}}`)}
	caps[2] = 'X'
	ret.Capabilities[2] = 'Y'
	check("mutating the Upstream passed to and returned by SetUpstream")

	cur, err := s.SetUpstream(t.Context(), want.ID, "new", "wrong", session.Upstream{})
	if !errors.Is(err, session.ErrConflict) {
		t.Fatalf("SetUpstream with wrong prev: got %v, want %v", err, session.ErrConflict)
	}
	cur.Capabilities[2] = 'Z'
	check("mutating the Upstream returned by a conflicting SetUpstream")
}

// scribble changes every field of r that shares memory with the store if the
// store fails to copy.
func scribble(r *session.Record) {
	for _, b := range [][]byte{r.ClientInfo, r.ClientCapabilities} {
		if len(b) > 2 {
			b[2] = 'X'
		}
	}
	for name, u := range r.Upstreams {
		if len(u.Capabilities) > 2 {
			u.Capabilities[2] = 'X'
		}
		u.SessionID = "scribbled"
		r.Upstreams[name] = u
	}
	if r.Upstreams != nil {
		r.Upstreams["scribbled"] = session.Upstream{SessionID: "scribbled"}
	}
	r.Principal.Subject = "scribbled"
}

// cloneRecord is a deep copy written independently of the stores' own, so a
// bug there cannot hide here.
func cloneRecord(r *session.Record) *session.Record {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	var c session.Record
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}
