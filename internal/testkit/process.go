package testkit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"testing"
	"time"
)

// GatewayPackage is the import path BuildGateway builds.
const GatewayPackage = "github.com/mcpgw/gateway/cmd/gateway"

const (
	// startTimeout bounds how long StartGateway waits for the listening line.
	startTimeout = 15 * time.Second
	// stopTimeout is how long Stop waits after SIGTERM before SIGKILL.
	stopTimeout = 5 * time.Second
)

var gatewayBuild struct {
	once sync.Once
	path string
	err  error
}

// BuildGateway builds the gateway binary, once per test binary, and returns
// its path. The binary is left under os.TempDir, in a directory of its own:
// nothing runs when a test binary exits to remove it.
func BuildGateway(t testing.TB) string {
	t.Helper()
	gatewayBuild.once.Do(func() {
		dir, err := os.MkdirTemp("", "mcpgw-testkit-")
		if err != nil {
			gatewayBuild.err = err
			return
		}
		path := filepath.Join(dir, "gateway")
		// The working directory of a test is its package's directory, inside
		// the module, so the go command finds go.mod from there.
		out, err := exec.Command("go", "build", "-o", path, GatewayPackage).CombinedOutput()
		if err != nil {
			os.RemoveAll(dir)
			gatewayBuild.err = fmt.Errorf("go build %s: %v\n%s", GatewayPackage, err, out)
			return
		}
		gatewayBuild.path = path
	})
	if gatewayBuild.err != nil {
		t.Fatalf("testkit: %v", gatewayBuild.err)
	}
	return gatewayBuild.path
}

// listeningRE matches the line a gateway logs once it accepts connections,
// in plain text or inside a structured log record: group 1 is "admin " for
// the admin listener, group 2 the URL, group 3 its host:port.
var listeningRE = regexp.MustCompile(`(\badmin )?listening on (http://([^/\s"]+)[^\s"]*)`)

// A Process is a gateway started by [StartGateway].
type Process struct {
	Cmd      *exec.Cmd
	Addr     string // host:port from the "listening on http://…" line
	URL      string // "http://" + Addr
	Endpoint string // the whole URL of that line, e.g. http://127.0.0.1:PORT/mcp
	// AdminAddr is the host:port of an "admin listening on http://…" line
	// logged before the main one, or empty.
	AdminAddr string

	mu     sync.Mutex
	output bytes.Buffer // stdout and stderr, interleaved as written
	stdout bytes.Buffer
	stderr bytes.Buffer
	ready  chan []string // receives the main listening line's submatches once
	admin  string        // AdminAddr, once seen

	exited  chan struct{} // closed once Wait has returned
	waitErr error         // set before exited is closed
	stop    sync.Once
}

// StartGateway runs bin with args, with env added to the test's own
// environment (a later entry wins over an earlier one of the same name). It
// waits until the process logs "listening on http://ADDR[/PATH]" on stdout or
// stderr (not "admin listening on …", which sets AdminAddr) and fails the
// test if that takes more than 15s or the process exits first.
// The process is stopped at the end of the test (see [Process.Stop]) and its
// output logged if the test failed.
func StartGateway(t testing.TB, bin string, args []string, env []string) *Process {
	t.Helper()
	p := &Process{
		Cmd:    exec.Command(bin, args...),
		ready:  make(chan []string, 1),
		exited: make(chan struct{}),
	}
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stdout = &lineWriter{p: p, own: &p.stdout}
	p.Cmd.Stderr = &lineWriter{p: p, own: &p.stderr}
	// Do not let a grandchild holding the output pipes block Wait forever.
	p.Cmd.WaitDelay = stopTimeout
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("testkit: starting %s: %v", bin, err)
	}
	go func() {
		p.waitErr = p.Cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("output of %s (pid %d):\n%s", bin, p.Cmd.Process.Pid, p.Output())
		}
	})

	select {
	case m := <-p.ready:
		p.Endpoint, p.Addr = m[2], m[3]
		p.URL = "http://" + p.Addr
		p.mu.Lock()
		p.AdminAddr = p.admin
		p.mu.Unlock()
		return p
	case <-p.exited:
		t.Fatalf("testkit: %s exited before listening: %v\n%s", bin, p.waitErr, p.Output())
	case <-time.After(startTimeout):
		t.Fatalf("testkit: %s did not log %q within %v\n%s", bin, "listening on http://ADDR", startTimeout, p.Output())
	}
	return nil
}

// Stop sends SIGTERM to the process, waits for it to exit, sends SIGKILL if
// it has not exited after 5s, and returns the error from [exec.Cmd.Wait] (nil
// for exit status 0). It may be called more than once, and after the process
// has exited on its own.
func (p *Process) Stop() error {
	p.stop.Do(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(stopTimeout):
			p.Cmd.Process.Kill()
			<-p.exited
		}
	})
	<-p.exited
	return p.waitErr
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Output returns everything the process wrote so far to stdout and stderr,
// interleaved in the order the writes arrived.
func (p *Process) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.output.String()
}

// Stdout returns everything the process wrote so far to stdout.
func (p *Process) Stdout() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

// Stderr returns everything the process wrote so far to stderr.
func (p *Process) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// lineWriter records one output stream of a Process and watches its
// complete lines for the listening address.
type lineWriter struct {
	p       *Process
	own     *bytes.Buffer // guarded by p.mu
	partial []byte        // the current incomplete line; used only by Write
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	w.p.output.Write(b)
	w.own.Write(b)
	w.p.mu.Unlock()

	w.partial = append(w.partial, b...)
	for {
		line, rest, ok := bytes.Cut(w.partial, []byte("\n"))
		if !ok {
			break
		}
		if m := listeningRE.FindStringSubmatch(string(line)); m != nil {
			if m[1] != "" {
				w.p.mu.Lock()
				w.p.admin = m[3]
				w.p.mu.Unlock()
			} else {
				select {
				case w.p.ready <- m:
				default: // already found
				}
			}
		}
		w.partial = rest
	}
	// Keep the partial line from aliasing a large buffer forever.
	w.partial = append([]byte(nil), w.partial...)
	return len(b), nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
// Another process may take it before the caller binds it; prefer letting a
// server listen on port 0 where possible.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
