package testkit

import (
	"errors"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestRedis(t *testing.T) {
	var pid int
	t.Run("lifecycle", func(t *testing.T) {
		r := StartRedis(t)
		pid = r.PID()
		if pid == 0 {
			t.Fatal("no PID")
		}
		if _, err := r.Do("SET", "k", "v"); err != nil {
			t.Fatal(err)
		}
		if v, err := r.Do("GET", "k"); err != nil || v != "v" {
			t.Fatalf("GET k = %v, %v", v, err)
		}
		// Persistence is off.
		for key, want := range map[string]string{"save": "", "appendonly": "no", "bind": "127.0.0.1"} {
			if got := configGet(t, r, key); got != want {
				t.Errorf("CONFIG GET %s = %q, want %q", key, got, want)
			}
		}

		addr := r.Addr
		r.Stop()
		if r.PID() != 0 {
			t.Error("PID after Stop")
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d still exists after Stop: %v", pid, err)
		}
		if err := r.ping(); err == nil {
			t.Error("PING answered after Stop")
		}
		r.Stop() // a second Stop is a no-op

		r.Start()
		pid = r.PID()
		if r.Addr != addr {
			t.Errorf("Addr changed across restart: %s, then %s", addr, r.Addr)
		}
		if v, err := r.Do("GET", "k"); !errors.Is(err, redis.Nil) {
			t.Errorf("data survived the restart: %v, %v", v, err)
		}
	})
	// Cleanup killed the restarted server.
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d still exists after the test: %v", pid, err)
	}
}

// configGet returns the value of one config parameter, whether the reply
// is a RESP3 map or a RESP2 array.
func configGet(t *testing.T, r *Redis, key string) string {
	t.Helper()
	v, err := r.Do("CONFIG", "GET", key)
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", key, err)
	}
	switch v := v.(type) {
	case map[any]any:
		s, _ := v[key].(string)
		return s
	case []any:
		if len(v) == 2 {
			s, _ := v[1].(string)
			return s
		}
	}
	t.Fatalf("CONFIG GET %s = %#v", key, v)
	return ""
}
