package testkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisStartTimeout bounds how long Start waits for redis-server to answer.
const redisStartTimeout = 10 * time.Second

// A Redis is a private redis-server process on 127.0.0.1, with no
// persistence (--save "" --appendonly no), so that a test can stop and
// restart it without touching any other Redis. Each start is a fresh, empty
// server on the same port.
//
// Start and Stop must be called from the test's goroutine (Start fails the
// test on error); Do and Output are safe for concurrent use.
type Redis struct {
	Addr string // 127.0.0.1:PORT, the same across restarts
	Port int

	tb  testing.TB
	bin string
	dir string

	mu     sync.Mutex
	output bytes.Buffer  // everything every start wrote
	cmd    *exec.Cmd     // the running server, or nil
	exited chan struct{} // closed once cmd has been waited for
}

// StartRedis starts a private redis-server (found on PATH) on a free port,
// stopped (SIGKILL, by PID) at the end of the test. A missing redis-server
// fails the test: these tests are never skipped.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testkit: redis-server is not on PATH (%v); install Redis (Debian: apt-get install redis-server), .ci/run does", err)
	}
	r := &Redis{tb: t, bin: bin, dir: t.TempDir(), Port: FreePort(t)}
	r.Addr = "127.0.0.1:" + strconv.Itoa(r.Port)
	t.Cleanup(func() {
		r.Stop()
		if t.Failed() {
			t.Logf("output of redis-server on %s:\n%s", r.Addr, r.Output())
		}
	})
	r.Start()
	return r
}

// Start starts the server again after [Redis.Stop], on the same port and
// with no data. It fails the test if the server is running already or does
// not answer PING within 10s.
func (r *Redis) Start() {
	r.tb.Helper()
	r.mu.Lock()
	if r.cmd != nil {
		r.mu.Unlock()
		r.tb.Fatalf("testkit: redis-server on %s is running already", r.Addr)
	}
	cmd := exec.Command(r.bin,
		"--port", strconv.Itoa(r.Port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", r.dir,
		"--daemonize", "no",
		"--logfile", "", // stdout
	)
	cmd.Stdout = lockedWriter{&r.mu, &r.output}
	cmd.Stderr = cmd.Stdout
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		r.mu.Unlock()
		r.tb.Fatalf("testkit: starting %s: %v", r.bin, err)
	}
	exited := make(chan struct{})
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(redisStartTimeout)
	for {
		err := r.ping()
		if err == nil {
			// Make sure the server answering is ours, not another process
			// that took the port in the meantime.
			if err = r.checkPID(cmd.Process.Pid); err == nil {
				return
			}
			r.Stop()
			r.tb.Fatalf("testkit: redis-server on %s: %v\n%s", r.Addr, err, r.Output())
		}
		select {
		case <-exited:
			r.mu.Lock()
			r.cmd = nil
			r.mu.Unlock()
			r.tb.Fatalf("testkit: redis-server on %s exited at start: %v\n%s", r.Addr, cmd.ProcessState, r.Output())
		default:
		}
		if time.Now().After(deadline) {
			r.Stop()
			r.tb.Fatalf("testkit: redis-server on %s did not answer PING within %v: %v\n%s", r.Addr, redisStartTimeout, err, r.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server (SIGKILL, by PID), as a crash would, and waits for
// it to exit; its data is lost. It may be called more than once, and while
// the server is not running.
func (r *Redis) Stop() {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// PID returns the process id of the running server, or 0 if it is stopped.
func (r *Redis) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Do sends one command to the server and returns its reply as go-redis
// decodes it (redis.Nil for a nil reply), with a 2s timeout.
func (r *Redis) Do(args ...any) (any, error) {
	c := redis.NewClient(&redis.Options{
		Addr:          r.Addr,
		MaxRetries:    -1,
		DialerRetries: 1,
		DialTimeout:   time.Second,
		ReadTimeout:   time.Second,
		WriteTimeout:  time.Second,
		PoolSize:      1,
	})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Do(ctx, args...).Result()
}

// Output returns what the server wrote to stdout and stderr so far, over
// every start.
func (r *Redis) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.output.String()
}

// ping sends PING over a plain connection (go-redis would log every
// refused dial while the server starts).
func (r *Redis) ping() error {
	conn, err := net.DialTimeout("tcp", r.Addr, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", line)
	}
	return nil
}

// checkPID checks that the server answering on Addr is process pid.
func (r *Redis) checkPID(pid int) error {
	v, err := r.Do("INFO", "server")
	if err != nil {
		return err
	}
	info, _ := v.(string)
	if !strings.Contains(info, "\nprocess_id:"+strconv.Itoa(pid)+"\r\n") {
		return fmt.Errorf("the server answering is not process %d (port taken by another process?)", pid)
	}
	return nil
}

// lockedWriter writes to w holding mu.
type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}
