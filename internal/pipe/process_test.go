package pipe

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/mcpgw/gateway/internal/testkit"
)

// TestProcessBounds: a line of stdout longer than the bound is dropped
// without being kept whole, and the next message still arrives; stderr is
// logged line by line, cut at maxStderrLine and rate-limited; Close stops a
// server that ignores its closed stdin with SIGTERM, and one that ignores
// SIGTERM with SIGKILL.
func TestProcessBounds(t *testing.T) {
	logs := &testkit.SyncBuffer{}
	script := `
head -c 3000000 /dev/zero | tr '\0' a; echo
echo '{"jsonrpc":"2.0","method":"notifications/message","params":{}}'
head -c 10000 /dev/zero | tr '\0' b >&2; echo >&2
i=0; while [ $i -lt 500 ]; do echo "err line $i" >&2; i=$((i+1)); done
trap '' TERM
echo '{"jsonrpc":"2.0","method":"notifications/message","params":{"trapped":true}}'
sleep 30`
	p, err := Start(Command{Argv: []string{"sh", "-c", script}, MaxMessageBytes: 1 << 20, StopGrace: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	msg, err := p.Recv()
	if err != nil || !bytes.Contains(msg, []byte("notifications/message")) {
		t.Fatalf("Recv = %q, %v", msg, err)
	}
	testkit.Poll(5*time.Second, func() bool { return strings.Contains(logs.String(), "err line 90") })
	// The server ignores SIGTERM from now on.
	if msg, err := p.Recv(); err != nil || !bytes.Contains(msg, []byte(`"trapped":true`)) {
		t.Fatalf("Recv = %q, %v", msg, err)
	}
	start := time.Now()
	p.Close()
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %v", d)
	}
	if p.ExitErr() == nil {
		t.Error("the process did not exit")
	}
	out := logs.String()
	if !strings.Contains(out, "longer than the bound") {
		t.Errorf("the long line was not reported:\n%.2000s", out)
	}
	if strings.Contains(out, strings.Repeat("b", maxStderrLine+1)) || !strings.Contains(out, "truncated=true") {
		t.Error("a long stderr line was not cut")
	}
	n := strings.Count(out, "err line")
	if n > stderrBurst+stderrRate*3 || n == 0 {
		t.Errorf("%d stderr lines logged of 500: the rate limit did not hold", n)
	}
}

// TestSendIsBounded: a server that never reads its stdin cannot block a
// Send beyond its context.
func TestSendIsBounded(t *testing.T) {
	p, err := Start(Command{Argv: []string{"sleep", "30"}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	big := bytes.Repeat([]byte("x"), 1<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := p.Send(ctx, big); err == nil {
		t.Fatal("Send to a server that does not read succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Send took %v", d)
	}
}

// TestSendCompactsNewlines: an indented message reaches the server on one
// line.
func TestSendCompactsNewlines(t *testing.T) {
	p, err := Start(Command{Argv: []string{"sh", "-c", "read -r line; printf %s\\\\n \"$line\""}, StopGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	msg := "{\n  \"jsonrpc\": \"2.0\",\n  \"method\": \"notifications/x\",\n  \"params\": {\"s\": \"a\\nb\"}\n}"
	if err := p.Send(context.Background(), []byte(msg)); err != nil {
		t.Fatal(err)
	}
	got, err := p.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"jsonrpc":"2.0","method":"notifications/x","params":{"s":"a\nb"}}`; string(got) != want {
		t.Errorf("server got %s, want %s", got, want)
	}
}
