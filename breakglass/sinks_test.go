package breakglass

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestEverySinkGoesThroughRedaction reads the engine's source for every
// write that leaves it (an audit record, a Jira issue or comment, a
// Kubernetes Event) and fails on one that does not take the one redaction
// path: records only through record (sealed, so redacted, by the store),
// Events only through emit (redact.Text), Jira text only as built by
// package ticket (whose every piece of user text goes through redact.Text).
// A new sink fails here until it is made to take that path.
func TestEverySinkGoesThroughRedaction(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	sinks := 0
	for _, entry := range entries {
		name := entry.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				where := fset.Position(call.Pos()).String() + " in " + fn.Name.Name
				switch on := selectorName(sel.X); {
				case on == "Audit" && sel.Sel.Name == "Append":
					sinks++
					if fn.Name.Name != "record" {
						t.Errorf("%s: an audit record written outside record", where)
					}
				case on == "Events" && sel.Sel.Name == "Create":
					sinks++
					if fn.Name.Name != "emit" {
						t.Errorf("%s: an Event created outside emit", where)
					}
				case (on == "Tickets" || on == "tickets") && (sel.Sel.Name == "Comment" || sel.Sel.Name == "Close"):
					sinks++
					if text := call.Args[len(call.Args)-1]; !builtByTicket(text) && !(fn.Name.Name == "closeTicket" && isIdent(text, "comment")) {
						t.Errorf("%s: Jira text not built by package ticket", where)
					}
				case on == "e" && sel.Sel.Name == "closeTicket":
					if !builtByTicket(call.Args[len(call.Args)-1]) {
						t.Errorf("%s: a closing comment not built by package ticket", where)
					}
				}
				return true
			})
		}
	}
	if sinks < 5 {
		t.Errorf("found %d sinks: the test no longer sees the engine's writes", sinks)
	}
}

// selectorName is the last name of x: Tickets for e.Tickets, Events for
// e.Kube.CoreV1().Events(ns), tickets for e.tickets().
func selectorName(x ast.Expr) string {
	switch t := x.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return t.Sel.Name
	case *ast.CallExpr:
		return selectorName(t.Fun)
	}
	return ""
}

// builtByTicket is whether x is a call of a package ticket function.
func builtByTicket(x ast.Expr) bool {
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	return ok && isIdent(sel.X, "ticket")
}

func isIdent(x ast.Expr, name string) bool {
	id, ok := x.(*ast.Ident)
	return ok && id.Name == name
}
