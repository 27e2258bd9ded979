package protocol

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Version
		ok   bool
	}{
		{"2025-03-26", V2025_03_26, true},
		{"2025-06-18", V2025_06_18, true},
		{"2025-11-25", V2025_11_25, true},
		{"2026-07-28", V2026_07_28, true},
		// A date that is no known revision still parses, in its place.
		{"2024-11-05", 20241105, true},
		{"2099-01-01", 20990101, true},
		{"0001-01-01", 10101, true},
		// Not dates.
		{"", 0, false},
		{"1.0", 0, false},
		{"DRAFT-2026-v1", 0, false},
		{"2025-11-25 ", 0, false},
		{" 2025-11-25", 0, false},
		{"2025-11-5", 0, false},
		{"2025/11/25", 0, false},
		{"2025-1a-25", 0, false},
		{"+025-11-25", 0, false},
		{"2025-00-10", 0, false},
		{"2025-13-10", 0, false},
		{"2025-12-00", 0, false},
		{"2025-12-32", 0, false},
		{"２025-11-25", 0, false},
	} {
		got, ok := ParseVersion(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestVersionString(t *testing.T) {
	for _, v := range Versions {
		s := v.String()
		if back, ok := ParseVersion(s); !ok || back != v {
			t.Errorf("ParseVersion(%q) = %d, %v; want %d", s, back, ok, v)
		}
	}
	for v, want := range map[Version]string{
		0: "", V2026_07_28: "2026-07-28", 20241105: "2024-11-05", 990101: "0099-01-01",
	} {
		if got := v.String(); got != want {
			t.Errorf("Version(%d).String() = %q, want %q", uint32(v), got, want)
		}
	}
}

// The order of Versions is the order of their dates, which for well-formed
// dates is also the order of their strings.
func TestVersionOrder(t *testing.T) {
	dates := []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2025-12-31", "2026-01-01", "2026-07-28", "2027-01-01"}
	for i, a := range dates {
		va, _ := ParseVersion(a)
		for j, b := range dates {
			vb, _ := ParseVersion(b)
			if got, want := va.AtLeast(vb), i >= j; got != want {
				t.Errorf("%s.AtLeast(%s) = %v, want %v", a, b, got, want)
			}
			if got, want := va.AtLeast(vb), a >= b; got != want {
				t.Errorf("%s.AtLeast(%s) = %v, string order says %v", a, b, got, want)
			}
		}
	}
	if !slices.IsSortedFunc(Versions, func(a, b Version) int { return int(b) - int(a) }) {
		t.Errorf("Versions %v not newest first", Versions)
	}
	if !slices.IsSortedFunc(SessionVersions, func(a, b Version) int { return int(b) - int(a) }) {
		t.Errorf("SessionVersions %v not newest first", SessionVersions)
	}
	if SessionVersions[0] != LatestSession || StatelessVersions[0] != LatestStateless {
		t.Errorf("latest: %v, %v; lists %v, %v", LatestSession, LatestStateless, SessionVersions, StatelessVersions)
	}
	var zero Version
	if zero.AtLeast(V2025_03_26) || zero.Stateless() {
		t.Error("the zero Version is at least a revision")
	}
}

func TestVersionLists(t *testing.T) {
	for _, v := range Versions {
		if got, want := v.Stateless(), slices.Contains(StatelessVersions, v); got != want {
			t.Errorf("%s.Stateless() = %v, listed stateless: %v", v, got, want)
		}
		if slices.Contains(StatelessVersions, v) == slices.Contains(SessionVersions, v) {
			t.Errorf("%s is in neither or both of the session and stateless lists", v)
		}
	}
	if len(Versions) != len(SessionVersions)+len(StatelessVersions) {
		t.Errorf("Versions %v is not the session and stateless lists together", Versions)
	}
	if later := Version(20990101); !later.Stateless() {
		t.Error("a later revision than 2026-07-28 has sessions")
	}
	if !slices.Contains(SessionVersions, Assumed) {
		t.Errorf("Assumed %s is not a session revision", Assumed)
	}
}

func TestListed(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"2025-11-25", true}, {"2025-06-18", true}, {"2025-03-26", true},
		{"2026-07-28", false}, {"2024-11-05", false}, {"", false}, {"2025-11-25x", false}, {"latest", false},
	} {
		if got := Listed(tc.in, SessionVersions); got != tc.want {
			t.Errorf("Listed(%q, SessionVersions) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestVersionJSON(t *testing.T) {
	b, err := json.Marshal(map[string]any{"supported": Versions})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"supported":["2026-07-28","2025-11-25","2025-06-18","2025-03-26"]}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
	if got, want := Join(SessionVersions, ", "), "2025-11-25, 2025-06-18, 2025-03-26"; got != want {
		t.Errorf("Join = %q, want %q", got, want)
	}
}

// ParseVersion, Listed and String of a listed Version run on every request:
// they must not allocate.
func TestVersionNoAllocs(t *testing.T) {
	s := string([]byte("2025-11-25")) // not a constant the compiler could fold
	if n := testing.AllocsPerRun(100, func() {
		if !Listed(s, SessionVersions) || LatestStateless.String() == "" {
			t.Fatal("not listed")
		}
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}
