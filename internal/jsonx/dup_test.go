package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// object returns a JSON object of n distinct members, "m0":0 … .
func object(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"m%d":%d`, i, i)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// BenchmarkDuplicateCheck parses objects of 10 to 100k members: the time
// per member must stay flat (the duplicate check was quadratic: 160k
// members took 44 s).
func BenchmarkDuplicateCheck(b *testing.B) {
	for _, n := range []int{10, 100, 1000, 10000, 100000} {
		data := object(n)
		name := strconv.Itoa(n)
		if n >= 1000 {
			name = strconv.Itoa(n/1000) + "k"
		}
		b.Run("members="+name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				if _, err := ParseValidObject(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/member")
		})
	}
}

// TestManyMembersLinear holds the member parse to linear time through the
// public API: ten times the members (200k, about 2.5 MB, more than the
// 1.8 MB object that pinned a core for 44 s) must take about ten times as
// long, not a hundred times; the best of three runs of each, so that a
// loaded machine does not decide. A duplicate at the very end must still
// be found.
func TestManyMembersLinear(t *testing.T) {
	const n = 200000
	data := object(n)
	small := object(n / 10)
	best := func(d []byte, want int) time.Duration {
		var min time.Duration
		for range 3 {
			start := time.Now()
			o, err := ParseObject(d)
			if err != nil {
				t.Fatal(err)
			}
			if len(o.Members) != want {
				t.Fatalf("%d members, want %d", len(o.Members), want)
			}
			if el := time.Since(start); min == 0 || el < min {
				min = el
			}
		}
		return min
	}
	tSmall, tLarge := best(small, n/10), best(data, n)
	if ratio := float64(tLarge) / float64(max(tSmall, time.Microsecond)); ratio > 40 {
		t.Errorf("parsing %d members took %v, %.0f times %d members' %v: not linear", n, tLarge, ratio, n/10, tSmall)
	}
	dup := append(data[:len(data)-1:len(data)-1], `,"m17":1}`...)
	if _, err := ParseObject(dup); err == nil || err.Error() != `duplicate member "m17"` {
		t.Errorf("duplicate after %d members: err %v", n, err)
	}
}

// TestDuplicateCheckAllocations: the objects every message has (a few
// members) are checked without allocating for the check.
func TestDuplicateCheckAllocations(t *testing.T) {
	data := object(12)
	if n := testing.AllocsPerRun(100, func() { _, _ = ParseValidObject(data) }); n > 16 {
		// The object, its members slice (made for 4, grown to 8 and 16) and
		// the 12 names, which are not common names: nothing for the check.
		t.Errorf("%v allocations for 12 members", n)
	}
}

// FuzzDuplicates holds ParseObject's duplicate check to a plain reference:
// the member names as encoding/json decodes them, in a set.
func FuzzDuplicates(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":2,"a":3}`, `{"a":1,"\u0061":2}`, string(object(20)), `{"m19":0,` + string(object(20)[1:])} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var top map[string]json.RawMessage
		if json.Unmarshal(data, &top) != nil {
			return // not an object
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.Token() // {
		seen := map[string]bool{}
		dup := false
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			name := tok.(string)
			if seen[name] {
				dup = true
			}
			seen[name] = true
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
		}
		_, err := ParseObject(data)
		if dup != (err != nil) {
			t.Fatalf("ParseObject(%q): err %v, reference duplicate %v", data, err, dup)
		}
	})
}

// TestParseValidEmptyValues: a member or an element without a value is an
// error even on the fast path, which otherwise trusts its input.
func TestParseValidEmptyValues(t *testing.T) {
	for _, in := range []string{`{"":}`, `{"a":,"b":1}`, `{"a": }`} {
		if o, err := ParseValidObject([]byte(in)); err == nil {
			t.Errorf("ParseValidObject(%s) = %+v", in, o.Members)
		}
	}
	for _, in := range []string{`[,]`, `[1,,2]`, `[ ]x`} {
		if a, err := ParseValidArray([]byte(in)); err == nil {
			t.Errorf("ParseValidArray(%s) = %q", in, a)
		}
	}
}
