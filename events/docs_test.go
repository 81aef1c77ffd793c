package events_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoAPIDocumented holds the Go API block of docs/EVENTS.md to the
// package: every function it lists exists with those parameter and
// result types (names may differ). It listed events.Validate long after
// that moved to a test-only package.
func TestGoAPIDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "EVENTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, found := strings.Cut(string(doc), "## Go API (package `events`)\n\n```go\n")
	block, _, closed := strings.Cut(block, "```")
	if !found || !closed {
		t.Fatal("docs/EVENTS.md has no Go API block")
	}
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]string{} // "Name" or "(Recv).Name" → its types
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.IsExported() {
				name := fd.Name.Name
				if fd.Recv != nil {
					name = "(" + types.ExprString(fd.Recv.List[0].Type) + ")." + name
				}
				have[name] = signature(fd.Type)
			}
		}
	}
	for line := range strings.Lines(block) {
		for _, sig := range strings.Split(strings.TrimSpace(line), "; ") {
			i := strings.Index(sig, "(")
			if strings.HasPrefix(sig, "(") {
				i += strings.Index(sig[i+1:], "(") + 1
			}
			name := sig[:i]
			expr, err := parser.ParseExpr("func" + sig[i:])
			if err != nil {
				t.Errorf("docs/EVENTS.md: %s: %v", sig, err)
				continue
			}
			want := signature(expr.(*ast.FuncType))
			switch got, ok := have[name]; {
			case !ok:
				t.Errorf("docs/EVENTS.md lists %s, which package events does not have", name)
			case got != want:
				t.Errorf("docs/EVENTS.md: %s%s, the package has %s", name, want, got)
			}
		}
	}
}

// signature is a function type's parameter and result types, without names.
func signature(ft *ast.FuncType) string {
	list := func(fl *ast.FieldList) string {
		var ts []string
		if fl != nil {
			for _, f := range fl.List {
				for range max(len(f.Names), 1) {
					ts = append(ts, types.ExprString(f.Type))
				}
			}
		}
		return "(" + strings.Join(ts, ", ") + ")"
	}
	return list(ft.Params) + " " + list(ft.Results)
}
