package pipe

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/mcpgw/gateway/internal/jsonrpc"
)

// A Conn is one connection to an MCP server that speaks JSON-RPC messages
// over a pipe. Recv is called by one goroutine at a time; Send and Close
// may be called concurrently with it and with each other, and Close more
// than once.
type Conn interface {
	// Send writes one message. It returns when the message is written, the
	// Conn ends, or ctx is done.
	Send(ctx context.Context, msg []byte) error
	// Recv returns the next message the server sent. After the Conn ends
	// it returns an error.
	Recv() ([]byte, error)
	// Close ends the Conn and waits for everything it started.
	Close() error
}

// Command is how to run a stdio MCP server.
type Command struct {
	// Argv is the program and its arguments; no shell is involved.
	Argv []string
	// Env is the whole environment of the process, "NAME=value" each.
	Env []string
	// Dir is its working directory; "" means the gateway's.
	Dir string
	// StopGrace is how long the process group has, after SIGTERM, before
	// SIGKILL. Default 5s.
	StopGrace time.Duration
	// MaxMessageBytes bounds one line of its stdout. Default 16 MiB.
	MaxMessageBytes int
	// Logger gets its stderr and what of its stdout is not JSON-RPC. Nil
	// means no logging.
	Logger *slog.Logger
	// Scrub, if set, is applied to every line logged (its env values are
	// secrets the server may print).
	Scrub func(string) string
}

const (
	defaultStopGrace  = 5 * time.Second
	defaultMaxMessage = 16 << 20
	// stdinWait is how long a process has to exit after its stdin is
	// closed before SIGTERM (basic/transports, "stdio" shutdown).
	stdinWait = 1 * time.Second
	// maxStderrLine bounds one logged stderr line; the rest of a longer
	// line is dropped.
	maxStderrLine = 4 << 10
	// stderrRate and stderrBurst bound the lines per second logged of one
	// process's stderr and of its stdout's garbage.
	stderrRate  = 20
	stderrBurst = 100
)

// A Process is a running stdio MCP server (basic/transports "stdio"):
// messages are newline-delimited JSON on its stdin and stdout. It runs in a
// process group of its own, so that stopping it stops whatever it started.
type Process struct {
	cmd    *exec.Cmd
	log    *slog.Logger
	scrub  func(string) string
	grace  time.Duration
	maxMsg int

	stdin  *os.File
	stdout *os.File
	stderr *os.File
	out    *bufio.Reader
	lines  *rate.Limiter // stderr and stdout garbage logged

	writeMu sync.Mutex // one message written at a time
	wg      sync.WaitGroup
	exited  chan struct{} // closed when the leader exited
	exitErr error         // its exit status, set before exited is closed

	closeOnce sync.Once
	closing   chan struct{}
	pid       int
}

// Start starts c. The process lives until Close, or until it exits.
func Start(c Command) (*Process, error) {
	if len(c.Argv) == 0 || c.Argv[0] == "" {
		return nil, errors.New("no command")
	}
	p := &Process{
		log:     c.Logger,
		scrub:   c.Scrub,
		grace:   c.StopGrace,
		maxMsg:  c.MaxMessageBytes,
		exited:  make(chan struct{}),
		closing: make(chan struct{}),
		lines:   rate.NewLimiter(stderrRate, stderrBurst),
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	if p.scrub == nil {
		p.scrub = func(s string) string { return s }
	}
	if p.grace <= 0 {
		p.grace = defaultStopGrace
	}
	if p.maxMsg <= 0 {
		p.maxMsg = defaultMaxMessage
	}
	// Pipes of our own rather than cmd.StdoutPipe: Wait closes those,
	// and a child of the server may hold the write ends after it exited.
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Env = c.Env
	if cmd.Env == nil {
		cmd.Env = []string{} // nil would mean the gateway's own environment
	}
	cmd.Dir = c.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	setProcessGroup(cmd)
	err = cmd.Start()
	// The child has its ends; ours are closed either way.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		// The error names the program, never its environment.
		return nil, fmt.Errorf("starting %s: %w", c.Argv[0], unwrapExec(err))
	}
	p.cmd, p.pid = cmd, cmd.Process.Pid
	p.stdin, p.stdout, p.stderr = inW, outR, errR
	// Small: most messages fit, longer ones are gathered (readLine), and an
	// idle process keeps only this.
	p.out = bufio.NewReaderSize(outR, 16<<10)
	p.wg.Add(2)
	go p.wait()
	go p.logStderr()
	return p, nil
}

// unwrapExec drops the *exec.Error and *os.PathError wrappers, whose
// messages repeat the path.
func unwrapExec(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// PID returns the process id of the server (its process group's, too).
func (p *Process) PID() int { return p.pid }

// Exited is closed when the server's process exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// wait reaps the leader, then kills what is left of its group: a child of a
// server that exited has no one to stop it.
func (p *Process) wait() {
	defer p.wg.Done()
	err := p.cmd.Wait()
	killGroup(p.pid)
	if err == nil {
		err = errors.New("exited")
	}
	p.exitErr = err
	close(p.exited)
}

// ExitErr returns how the process ended, nil while it runs.
func (p *Process) ExitErr() error {
	select {
	case <-p.exited:
		return p.exitErr
	default:
		return nil
	}
}

// Send writes msg, a JSON-RPC message, and a newline. A message holding
// newlines (indented JSON: inside strings JSON escapes them) is compacted
// first: stdio messages must not hold one (basic/transports, "stdio").
func (p *Process) Send(ctx context.Context, msg []byte) error {
	if bytes.IndexByte(msg, '\n') >= 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, msg); err != nil {
			return fmt.Errorf("invalid message: %w", err)
		}
		msg = b.Bytes()
	}
	// A server that does not read its stdin blocks the write once the
	// pipe's buffer is full: the write is bounded by ctx with a deadline
	// on the pipe.
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	select {
	case <-p.closing:
		return errors.New("stdio server stopped")
	default:
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = p.stdin.SetWriteDeadline(dl)
	} else {
		_ = p.stdin.SetWriteDeadline(time.Time{})
	}
	stop := context.AfterFunc(ctx, func() { _ = p.stdin.SetWriteDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := p.stdin.Write(buf)
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("writing to the stdio server: %w", errors.Unwrap(err))
	}
	return nil
}

// Recv returns the next JSON-RPC message on the server's stdout. Lines that
// are not one (a banner, a debug print) are logged and dropped, as are
// lines longer than the bound, which are read to their end and never kept
// whole.
func (p *Process) Recv() ([]byte, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if _, derr := jsonrpc.Decode(line); derr != nil || jsonrpc.IsBatch(line) {
			p.logLine("stdio server wrote something other than JSON-RPC on stdout; dropped", line)
			continue
		}
		// A copy: the next read reuses the buffer, and the message is
		// queued for a reader.
		return bytes.Clone(line), nil
	}
}

// readLine reads one line of stdout, without its newline. A line longer
// than maxMsg is consumed and reported (logged), and the next one read.
func (p *Process) readLine() ([]byte, error) {
	var long []byte
	over := false
	for {
		frag, err := p.out.ReadSlice('\n')
		switch {
		case err == nil:
			if over {
				p.logLine("stdio server wrote a line longer than the bound on stdout; dropped", nil)
				over, long = false, nil
				continue
			}
			if long != nil {
				return append(long, frag[:len(frag)-1]...), nil
			}
			return frag[:len(frag)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			if !over && len(long)+len(frag) > p.maxMsg {
				over, long = true, nil
			}
			if !over {
				long = append(long, frag...)
			}
		default:
			if errors.Is(err, os.ErrClosed) {
				err = io.EOF
			}
			return nil, fmt.Errorf("stdio server closed its stdout: %w", err)
		}
	}
}

// logStderr logs the server's stderr, line by line, bounded and
// rate-limited.
func (p *Process) logStderr() {
	defer p.wg.Done()
	r := bufio.NewReaderSize(p.stderr, maxStderrLine)
	dropped := 0
	for {
		frag, err := r.ReadSlice('\n')
		if len(frag) > 0 {
			// A copy: skipping the rest of a long line reuses the buffer.
			line := string(bytes.TrimRight(frag, "\r\n"))
			cut := errors.Is(err, bufio.ErrBufferFull)
			if cut {
				// Skip the rest of the line.
				for errors.Is(err, bufio.ErrBufferFull) {
					_, err = r.ReadSlice('\n')
				}
			}
			if p.lines.Allow() {
				if dropped > 0 {
					p.log.Warn("stdio server stderr lines dropped (rate limit)", "dropped", dropped)
					dropped = 0
				}
				p.log.Info("stdio server stderr", "line", p.scrub(line), "truncated", cut)
			} else {
				dropped++
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// logLine logs a line of stdout that is not relayed, rate-limited with
// stderr.
func (p *Process) logLine(msg string, line []byte) {
	if !p.lines.Allow() {
		return
	}
	if line == nil {
		p.log.Warn(msg)
		return
	}
	if len(line) > maxStderrLine {
		line = line[:maxStderrLine]
	}
	p.log.Warn(msg, "line", p.scrub(string(line)))
}

// Close stops the server as basic/transports says a client should: it
// closes its stdin, waits a little, sends SIGTERM to its process group and
// SIGKILL after the grace. It waits for the process and the goroutines
// reading its output.
func (p *Process) Close() error {
	p.closeOnce.Do(func() {
		close(p.closing)
		// A write blocked on a server that does not read ends now.
		_ = p.stdin.SetWriteDeadline(time.Now())
		p.writeMu.Lock()
		p.stdin.Close()
		p.writeMu.Unlock()
		select {
		case <-p.exited:
		case <-time.After(stdinWait):
			termGroup(p.pid)
			select {
			case <-p.exited:
			case <-time.After(p.grace):
				killGroup(p.pid)
				<-p.exited
			}
		}
		// The readers end when every holder of the write ends is gone;
		// closing ours makes sure they end even if one escaped the group.
		p.stdout.Close()
		p.stderr.Close()
		p.wg.Wait()
	})
	return nil
}
