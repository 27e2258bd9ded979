package upcall

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

var errTestCancel = errors.New("cancelled by the test")

func TestInFlight(t *testing.T) {
	var f InFlight
	if f.Cancel("s1", jsonrpc.IntID(1), errTestCancel) {
		t.Fatal("Cancel of an unknown request reported one")
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	remove := f.Add("s1", jsonrpc.IntID(1), cancel)

	// Another session's request 1, and the string id "1", are others.
	if f.Cancel("s2", jsonrpc.IntID(1), errTestCancel) || f.Cancel("s1", jsonrpc.StringID("1"), errTestCancel) {
		t.Fatal("Cancel of another request reported this one")
	}
	if ctx.Err() != nil {
		t.Fatal("another request's Cancel cancelled this one")
	}
	if !f.Cancel("s1", jsonrpc.IntID(1), errTestCancel) {
		t.Fatal("Cancel of a request being served reported none")
	}
	if !errors.Is(context.Cause(ctx), errTestCancel) {
		t.Fatalf("cause = %v, want the Cancel's", context.Cause(ctx))
	}
	remove()
	if f.Cancel("s1", jsonrpc.IntID(1), errTestCancel) {
		t.Fatal("Cancel of a removed request reported one")
	}
}

// TestInFlightReusedID: the remove of a request whose id a later request
// of the session reused leaves the later one cancellable.
func TestInFlightReusedID(t *testing.T) {
	var f InFlight
	removeFirst := f.Add("s", jsonrpc.IntID(7), func(error) {})
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	removeSecond := f.Add("s", jsonrpc.IntID(7), cancel)
	removeFirst()
	if !f.Cancel("s", jsonrpc.IntID(7), errTestCancel) || ctx.Err() == nil {
		t.Fatal("the later request was forgotten with the earlier one")
	}
	removeSecond()
	if f.Cancel("s", jsonrpc.IntID(7), errTestCancel) {
		t.Fatal("Cancel after both removes reported a request")
	}
}

// TestInFlightConcurrent is for -race: requests added, cancelled and
// removed at once from many goroutines.
func TestInFlightConcurrent(t *testing.T) {
	var f InFlight
	var wg sync.WaitGroup
	for g := range 8 {
		session := "s" + strconv.Itoa(g%2)
		wg.Go(func() {
			for i := range 200 {
				id := jsonrpc.IntID(int64(g*1000 + i))
				ctx, cancel := context.WithCancelCause(context.Background())
				remove := f.Add(session, id, cancel)
				if !f.Cancel(session, id, errTestCancel) {
					t.Error("Cancel of a request being served reported none")
				}
				_ = f.Cancel(session, jsonrpc.IntID(int64(i)), errTestCancel) // perhaps another goroutine's
				remove()
				if !errors.Is(context.Cause(ctx), errTestCancel) {
					t.Error("request not cancelled")
				}
			}
		})
	}
	wg.Wait()
	if f.Cancel("s0", jsonrpc.IntID(1), errTestCancel) {
		t.Fatal("a request outlived its remove")
	}
}
