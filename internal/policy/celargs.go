package policy

import (
	"cel.dev/cel-go/cel"
	celast "cel.dev/cel-go/common/ast"
	"cel.dev/cel-go/common/operators"
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
