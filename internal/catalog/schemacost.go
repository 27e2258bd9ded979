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
//     again), enum values each. A schema over maxSchemaExpansion is not
//     enforced, logged as any schema the gateway cannot use. The count
//     itself is linear: it is memoized per (schema, depth left).
//   - Each counted schema is evaluated at most once per place of the
//     value (its path in the expansion picks the places: properties one
//     member, items each element), so one validation costs at most the
//     expansion times the value's size (valueCost). A call whose product
//     is over maxValidationWork is refused before validating: its
//     arguments are too large to check against that schema.
//
// A $ref cycle recurses into the value (a tree of nodes): the expansion is
// counted as if the value were maxRecursionDepth levels deep, and a value
// deeper than that is refused for that schema; a cycle that does not
// descend into the value (the validator would report it as an infinite
// loop on every value that reaches it) makes the schema unusable, as do
// $dynamicRef and $recursiveRef, whose targets are chosen while
// validating. So the work of one validation is bounded before it starts,
// and its wall time with it (tens of milliseconds at the bound): the
// call's context is not consulted during it, which the validator cannot
// do, and need not be.
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

// valueCost is the size of a decoded JSON value for validation work: one
// per value and member name, and one per 16 bytes of its strings and
// names (patterns and formats read them); depth is how deeply it nests.
func valueCost(v any) (cost, depth int) {
	switch v := v.(type) {
	case map[string]any:
		cost = 1
		for k, m := range v {
			c, d := valueCost(m)
			cost += 1 + len(k)/16 + c
			depth = max(depth, d)
		}
		return cost, depth + 1
	case []any:
		cost = 1
		for _, m := range v {
			c, d := valueCost(m)
			cost += c
			depth = max(depth, d)
		}
		return cost, depth + 1
	case string:
		return 1 + len(v)/16, 0
	}
	return 1, 0
}
