package catalog

import (
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Validation work. A schema of a few KiB can make the validator's work
// explode: each $ref is followed where it stands, so a chain of $defs
// each an anyOf of two $refs to the next is 2^depth schemas once expanded,
// all tried against a bad value (issue 26: depth 20 cost 5.7 s and 896 MiB
// for one call; depth 47 never ends). The validator has no step bound and
// no context, so the bound is put on what it is given:
//
//   - At compile time, schemaCost counts the schemas validation may
//     evaluate at one place of the value: every subschema, through $ref
//     with multiplicity (each occurrence of a $ref counts its target
//     again), enum values each, a recursive schema unrolled as if the
//     value nested maxRecursionDepth levels. A schema over
//     maxSchemaExpansion is not enforced, logged as any schema the gateway
//     cannot use (the tool is still listed and callable). The count itself
//     is linear: memoized per (schema, depth left), and stopped at the
//     bound. A $ref cycle that does not descend into the value (the
//     validator would report an infinite loop on every value reaching it),
//     $dynamicRef and $recursiveRef (whose targets are chosen while
//     validating) make a schema unusable too.
//   - Before each validation, evaluations counts the evaluations it will
//     make on the value at hand, walking the schema and the value as the
//     validator does but without validating, and stops past
//     maxValidationWork: such a value is refused (too large to check)
//     without validating. The count costs at most that many cheap steps.
//
// So the work of one validation is bounded before it starts, and its wall
// time with it (a fraction of a second at the bound, even when every
// evaluation fails and is reported): the call's context is not consulted
// during it, which the validator cannot do, and need not be.
const (
	maxSchemaExpansion = 1 << 12
	maxValidationWork  = 1 << 17
	maxRecursionDepth  = 32
)

var (
	errSchemaTooLarge = fmt.Errorf("expands through $ref to more than %d schemas", maxSchemaExpansion)
	errSchemaLoop     = errors.New("has a $ref cycle that does not descend into the value")
	errSchemaDynamic  = errors.New("uses $dynamicRef or $recursiveRef")
)

// costState is a schema with how deep the value may still go below it.
type costState struct {
	s     *jsonschema.Schema
	depth int
}

type coster struct {
	memo      map[costState]int
	onStack   map[costState]bool
	stacked   map[*jsonschema.Schema]int // schemas on the stack, at any depth
	visited   int
	recursive bool // some schema was reached again below itself
}

// schemaCost returns the expansion of s (see above), and whether s
// recurses through a $ref cycle; err says why s is not to be enforced.
func schemaCost(s *jsonschema.Schema) (cost int, recursive bool, err error) {
	c := &coster{memo: map[costState]int{}, onStack: map[costState]bool{}, stacked: map[*jsonschema.Schema]int{}}
	cost, err = c.cost(costState{s, maxRecursionDepth})
	return cost, c.recursive, err
}

func (c *coster) cost(st costState) (int, error) {
	if st.s == nil || st.depth < 0 {
		return 0, nil
	}
	if n, ok := c.memo[st]; ok {
		return n, nil
	}
	if c.onStack[st] {
		return 0, errSchemaLoop
	}
	if c.visited++; c.visited > maxSchemaExpansion {
		return 0, errSchemaTooLarge
	}
	s := st.s
	if s.DynamicRef != nil || s.RecursiveRef != nil {
		return 0, errSchemaDynamic
	}
	c.onStack[st] = true
	c.stacked[s]++
	defer func() {
		delete(c.onStack, st)
		c.stacked[s]--
	}()
	n := 1
	if s.Enum != nil {
		if n += len(s.Enum.Values); n > maxSchemaExpansion {
			return 0, errSchemaTooLarge
		}
	}
	var err error
	add := func(sub *jsonschema.Schema, descend bool) {
		if err != nil || sub == nil {
			return
		}
		if c.stacked[sub] > 0 {
			c.recursive = true // a cycle: an error unless it went below
		}
		next := st
		next.s = sub
		if descend {
			next.depth--
		}
		var m int
		if m, err = c.cost(next); err == nil {
			if n += m; n > maxSchemaExpansion {
				err = errSchemaTooLarge
			}
		}
	}
	addAny := func(v any, descend bool) {
		switch v := v.(type) {
		case *jsonschema.Schema:
			add(v, descend)
		case []*jsonschema.Schema:
			for _, sub := range v {
				add(sub, descend)
			}
		}
	}
	// In place: the same value.
	add(s.Ref, false)
	add(s.Not, false)
	add(s.If, false)
	add(s.Then, false)
	add(s.Else, false)
	addAny(s.AllOf, false)
	addAny(s.AnyOf, false)
	addAny(s.OneOf, false)
	for _, sub := range s.DependentSchemas {
		add(sub, false)
	}
	for _, d := range s.Dependencies {
		addAny(d, false)
	}
	// Below: the value's members, items or names.
	add(s.PropertyNames, true)
	for _, sub := range s.Properties {
		add(sub, true)
	}
	for _, sub := range s.PatternProperties {
		add(sub, true)
	}
	addAny(s.AdditionalProperties, true)
	add(s.UnevaluatedProperties, true)
	add(s.Contains, true)
	addAny(s.Items, true)
	addAny(s.AdditionalItems, true)
	addAny(s.PrefixItems, true)
	add(s.Items2020, true)
	add(s.UnevaluatedItems, true)
	// contentSchema is not asserted (content assertions are off).
	if err != nil {
		return 0, err
	}
	c.memo[st] = n
	return n, nil
}

// evaluations counts, without validating, the schema evaluations that
// validating v against s makes, as the validator walks them: each
// subschema in place, and below, each member or item a keyword applies to
// (conservatively: a patternProperties or additionalProperties schema
// counted for every member, every branch of if counted). It stops as
// soon as the count passes limit, and reports whether it stayed within
// it, so that its own work is bounded by limit as well.
func evaluations(s *jsonschema.Schema, v any, limit int) bool {
	w := &evalCounter{left: limit}
	w.count(s, v)
	return w.left >= 0
}

type evalCounter struct{ left int }

func (w *evalCounter) count(s *jsonschema.Schema, v any) {
	if s == nil || w.left < 0 {
		return
	}
	w.left--
	if s.Enum != nil {
		w.left -= len(s.Enum.Values)
	}
	if s, ok := v.(string); ok {
		w.left -= len(s) / 16 // patterns and formats read it
	}
	inPlace := func(subs ...*jsonschema.Schema) {
		for _, sub := range subs {
			w.count(sub, v)
		}
	}
	inPlace(s.Ref, s.Not, s.If, s.Then, s.Else)
	inPlace(s.AllOf...)
	inPlace(s.AnyOf...)
	inPlace(s.OneOf...)
	for _, sub := range s.DependentSchemas {
		w.count(sub, v)
	}
	for _, d := range s.Dependencies {
		if sub, ok := d.(*jsonschema.Schema); ok {
			w.count(sub, v)
		}
	}
	switch v := v.(type) {
	case map[string]any:
		additional, _ := s.AdditionalProperties.(*jsonschema.Schema)
		for k, m := range v {
			w.count(s.PropertyNames, k)
			w.count(s.Properties[k], m)
			for _, sub := range s.PatternProperties {
				w.count(sub, m)
			}
			w.count(additional, m)
			w.count(s.UnevaluatedProperties, m)
			if w.left < 0 {
				return
			}
		}
	case []any:
		items, _ := s.Items.(*jsonschema.Schema)
		prefix, _ := s.Items.([]*jsonschema.Schema)
		additional, _ := s.AdditionalItems.(*jsonschema.Schema)
		for i, m := range v {
			w.count(items, m)
			if i < len(prefix) {
				w.count(prefix[i], m)
			}
			if i < len(s.PrefixItems) {
				w.count(s.PrefixItems[i], m)
			}
			w.count(additional, m)
			w.count(s.Items2020, m)
			w.count(s.Contains, m)
			w.count(s.UnevaluatedItems, m)
			if w.left < 0 {
				return
			}
		}
	}
}
