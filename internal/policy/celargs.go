package policy

import (
	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
	"cel.dev/cel-go/common/overloads"
	"cel.dev/cel-go/common/types"

	"github.com/mcpgw/gateway/internal/policy/celenv"
)

// argumentsRead returns what the checked expression a reads of the
// arguments: the top-level members it selects by a constant name
// (arguments.repo, arguments["repo"], has(arguments.repo)), or all of
// them when it uses the map in any other way (arguments.size(), "k" in
// arguments, a comprehension over it), so that a decision decodes only
// the members its rules can see.
func argumentsRead(a *cel.Ast) argNeed {
	var need argNeed
	idents, covered := 0, 0
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		switch e.Kind() {
		case celast.IdentKind:
			if e.AsIdent() == celenv.Arguments {
				idents++
			}
		case celast.SelectKind:
			s := e.AsSelect()
			if isArguments(s.Operand()) {
				covered++
				need.add(argNeed{names: []string{s.FieldName()}})
			}
		case celast.CallKind:
			c := e.AsCall()
			if c.FunctionName() != operators.Index && c.FunctionName() != operators.OptIndex || len(c.Args()) != 2 || !isArguments(c.Args()[0]) {
				return
			}
			if k := c.Args()[1]; k.Kind() == celast.LiteralKind {
				if s, ok := k.AsLiteral().(types.String); ok {
					covered++
					need.add(argNeed{names: []string{string(s)}})
				}
			}
		}
	}))
	if idents > covered {
		return argNeed{all: true}
	}
	return need
}

func isArguments(e celast.Expr) bool {
	return e.Kind() == celast.IdentKind && e.AsIdent() == celenv.Arguments
}

// boundedCost reports whether every evaluation of the checked expression
// a costs at most limit whatever the input, by its shape alone: no
// comprehension, and every call one whose cost a literal operand bounds
// (==, != and ordering against a literal, "in" a literal list, an index
// by a literal key, startsWith/endsWith of a literal) or constant
// (logic, arithmetic but "+"). Each node then costs at most its share of
// the longest literal, so nodes × (longest literal + 10) bounds the total.
// Such an expression needs no runtime cost tracking, which is about half
// of what a small rule costs to evaluate; any other keeps it.
func boundedCost(a *cel.Ast, limit uint64) bool {
	ok := true
	var nodes, longest uint64
	celast.PreOrderVisit(a.NativeRep().Expr(), celast.NewExprVisitor(func(e celast.Expr) {
		nodes++
		switch e.Kind() {
		case celast.IdentKind, celast.SelectKind, celast.ListKind, celast.MapKind:
		case celast.LiteralKind:
			longest = max(longest, literalBytes(e))
		case celast.CallKind:
			if !boundedCall(e.AsCall()) {
				ok = false
			}
		default: // comprehensions, structs, anything new
			ok = false
		}
	}))
	return ok && nodes*(longest+10) <= limit
}

func boundedCall(c celast.CallExpr) bool {
	args := c.Args()
	switch c.FunctionName() {
	case operators.LogicalAnd, operators.LogicalOr, operators.LogicalNot, operators.Conditional,
		operators.NotStrictlyFalse,
		operators.Negate, operators.Subtract, operators.Multiply, operators.Divide, operators.Modulo:
		return true
	case operators.Equals, operators.NotEquals, operators.Less, operators.LessEquals, operators.Greater, operators.GreaterEquals:
		return len(args) == 2 && (literal(args[0]) || literal(args[1]))
	case operators.In:
		return len(args) == 2 && literal(args[1])
	case operators.Index, operators.OptIndex:
		return len(args) == 2 && literal(args[1])
	case overloads.StartsWith, overloads.EndsWith:
		return c.IsMemberFunction() && len(args) == 1 && literal(args[0])
	}
	return false
}

// literal reports whether e is a constant or a list of constants.
func literal(e celast.Expr) bool {
	switch e.Kind() {
	case celast.LiteralKind:
		return true
	case celast.ListKind:
		for _, el := range e.AsList().Elements() {
			if el.Kind() != celast.LiteralKind {
				return false
			}
		}
		return true
	}
	return false
}

func literalBytes(e celast.Expr) uint64 {
	switch v := e.AsLiteral().(type) {
	case types.String:
		return uint64(len(v))
	case types.Bytes:
		return uint64(len(v))
	}
	return 8
}
