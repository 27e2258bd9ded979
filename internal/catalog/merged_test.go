package catalog

import "testing"

func TestMergedCache(t *testing.T) {
	var mc MergedCache
	a, b := &Upstream{Name: "a"}, &Upstream{Name: "b"}
	la, lb, lb2 := &Listing{}, &Listing{}, &Listing{}
	ups := []*Upstream{a, b}
	if mc.Get("t", Tools, ups, []*Listing{la, lb}) != nil {
		t.Fatal("empty cache returned a list")
	}
	m := mc.Put("t", Tools, ups, []*Listing{la, lb}, []byte(`{"tools":[]}`), []Item{{Original: "x"}})
	if got := mc.Get("t", Tools, []*Upstream{a, b}, []*Listing{la, lb}); got != m {
		t.Fatal("same listings: not reused")
	}
	for name, miss := range map[string]func() *Merged{
		"listing replaced": func() *Merged { return mc.Get("t", Tools, ups, []*Listing{la, lb2}) },
		"upstream left":    func() *Merged { return mc.Get("t", Tools, ups[:1], []*Listing{la}) },
		"other kind":       func() *Merged { return mc.Get("t", Prompts, ups, []*Listing{la, lb}) },
		"other tenant":     func() *Merged { return mc.Get("u", Tools, ups, []*Listing{la, lb}) },
	} {
		if miss() != nil {
			t.Errorf("%s: reused", name)
		}
	}
	built := 0
	build := func(items []Item) any { built++; return len(items) }
	first, again := m.Index(build), m.Index(build)
	if first != 1 || again != 1 || built != 1 {
		t.Errorf("index built %d times, want once", built)
	}
}
