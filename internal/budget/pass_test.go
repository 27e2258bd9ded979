package budget

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/config"
)

// passRig is one upstream's guards, on a clock the test moves: a gate of
// one slot and no queue, and a breaker that opens at the first failure,
// for 10 s, with one probe.
type passRig struct {
	now  time.Time
	gate *Gate
	brk  *Breaker
}

func newPassRig(t *testing.T) *passRig {
	t.Helper()
	r := &passRig{now: time.Unix(0, 0)}
	g := NewGuards()
	g.now = func() time.Time { return r.now }
	g.Configure([]config.Upstream{{
		Name:           "u",
		Concurrency:    &config.Concurrency{MaxInFlight: 1, Queue: new(0)},
		CircuitBreaker: &config.CircuitBreaker{Failures: 1, OpenFor: config.Duration(10 * time.Second), HalfOpenProbes: 1},
	}})
	r.gate, r.brk = g.Gate("u"), g.Breaker("u")
	return r
}

func (r *passRig) pass() (func(Outcome), error) {
	return Pass(context.Background(), r.gate, r.brk, "t", "p")
}

func refusedBy(err error, k Kind) bool {
	var ref *Refusal
	return errors.As(err, &ref) && ref.Kind == k
}

// TestPassOpenBreaker: an open circuit refuses at once, before the gate
// is asked: no slot is taken.
func TestPassOpenBreaker(t *testing.T) {
	r := newPassRig(t)
	done, err := r.pass()
	if err != nil {
		t.Fatal(err)
	}
	done(Failed)
	if !r.brk.Open() {
		t.Fatal("the failure reported by done did not open the circuit")
	}
	if _, err := r.pass(); !refusedBy(err, KindCircuit) {
		t.Fatalf("through an open circuit: %v", err)
	}
	if n := r.gate.InFlight(); n != 0 {
		t.Errorf("%d in flight after a refusal by the breaker", n)
	}
}

// TestPassFullGate: the gate's refusal is the answer, and the breaker is
// told Unknown: a closed circuit does not count it as a failure, and a
// half-open one's probe is free again.
func TestPassFullGate(t *testing.T) {
	r := newPassRig(t)
	hold, err := r.pass()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.pass(); !refusedBy(err, KindConcurrency) {
		t.Fatalf("past a full gate: %v", err)
	}
	if s := r.brk.State(); s != "closed" {
		t.Fatalf("circuit %s after a refusal by the gate: it was counted as a failure", s)
	}

	// Open the circuit, and wait until a probe is due.
	report, err := r.brk.Allow()
	if err != nil {
		t.Fatal(err)
	}
	report(Failed)
	r.now = r.now.Add(10 * time.Second)
	// The probe finds the gate full: refused, and the probe given back.
	if _, err := r.pass(); !refusedBy(err, KindConcurrency) {
		t.Fatalf("probe past a full gate: %v", err)
	}
	hold(Succeeded)
	done, err := r.pass()
	if err != nil {
		t.Fatalf("the probe refused by the gate still holds the half-open circuit: %v", err)
	}
	done(Succeeded)
	if s := r.brk.State(); s != "closed" {
		t.Errorf("circuit %s after a good probe", s)
	}
}

// TestPassDone: done gives back the slot and reports the outcome.
func TestPassDone(t *testing.T) {
	r := newPassRig(t)
	done, err := r.pass()
	if err != nil {
		t.Fatal(err)
	}
	if n := r.gate.InFlight(); n != 1 {
		t.Fatalf("%d in flight, want 1", n)
	}
	done(Succeeded)
	if n := r.gate.InFlight(); n != 0 {
		t.Fatalf("%d in flight after done", n)
	}
	if r.brk.Open() {
		t.Fatal("a success opened the circuit")
	}
	done, err = r.pass()
	if err != nil {
		t.Fatalf("slot not given back: %v", err)
	}
	done(Unknown)
	if r.brk.Open() {
		t.Fatal("an unknown outcome opened the circuit")
	}
}

// TestPassUnguarded: an upstream with neither gate nor breaker lets every
// request through, and done does nothing.
func TestPassUnguarded(t *testing.T) {
	done, err := Pass(context.Background(), nil, nil, "t", "p")
	if err != nil {
		t.Fatal(err)
	}
	done(Failed)
}
