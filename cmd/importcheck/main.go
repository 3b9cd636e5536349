package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	start := "."
	if len(os.Args) > 1 {
		start = os.Args[1]
	}
	root, err := findModuleRoot(start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(2)
	}
	violations, err := Check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(2)
	}
	for _, v := range violations {
		fmt.Println(v)
	}
	if len(violations) > 0 {
		os.Exit(1)
	}
}

// Violation is one broken layer rule: where (file:line:col, relative to the
// module root, slash-separated) and what.
type Violation struct {
	Pos string
	Msg string
}

func (v Violation) String() string { return v.Pos + ": " + v.Msg }

// rule says what a top-level folder may import from the module.
type rule struct {
	// anything: every import is allowed (testfixtures, cmd).
	anything bool
	// layers are the module's top-level folders it may import.
	layers []string
	// pure: standard library only (and allowThirdParty), minus impure
	// packages and clock reads.
	pure bool
	// allowStd are impure standard packages this pure layer may still
	// import: events declares the store port, whose methods take a
	// context.Context (it never creates or waits on one).
	allowStd []string
	// allowThirdParty are the only third-party packages this pure layer
	// may import: JSON v2 (github.com/go-json-experiment/json), which is
	// Go 1.27's encoding/json/v2 for a toolchain that has it only as an
	// experiment; the import moves to the standard library with the
	// toolchain.
	allowThirdParty []string
}

var rules = map[string]rule{
	"events":      {pure: true, allowStd: []string{"context"}, allowThirdParty: []string{jsonV2}},
	"domain":      {pure: true, layers: []string{"events"}},
	"commands":    {layers: []string{"domain", "events"}},
	"projections": {layers: []string{"events", "domain"}},
	"adapters":    {layers: []string{"events", "commands", "projections"}},
	"api":         {layers: []string{"commands", "projections", "events", "domain"}},
	// node is one running server, composed of every layer below it; only
	// cmd composes a node.
	"node":         {layers: []string{"api", "commands", "projections", "adapters", "events", "domain"}},
	"testfixtures": {anything: true},
	"cmd":          {anything: true},
}

// jsonV2 is JSON v2, the encoding/json/v2 of the standard library to come.
const jsonV2 = "github.com/go-json-experiment/json"

// impureStd are the standard packages a pure layer may not import: they do
// I/O, read the clock or randomness, log, carry a context or share state.
var impureStd = map[string]bool{
	"os":           true,
	"io/fs":        true,
	"io/ioutil":    true,
	"net":          true,
	"net/http":     true,
	"log":          true,
	"log/slog":     true,
	"math/rand":    true,
	"math/rand/v2": true,
	"crypto/rand":  true,
	"context":      true,
	"sync":         true,
	"database/sql": true,
	"syscall":      true,
}

// impureStdTrees are standard package trees a pure layer may not import
// from either (os/exec, sync/atomic, net/http/httptest, …).
var impureStdTrees = []string{"os/", "log/", "sync/", "net/http/", "database/sql/", "math/rand/"}

// clockReads are the functions of package time that read the clock or wait.
var clockReads = map[string]bool{
	"Now":       true,
	"Since":     true,
	"Until":     true,
	"Sleep":     true,
	"After":     true,
	"AfterFunc": true,
	"Tick":      true,
	"NewTimer":  true,
	"NewTicker": true,
}

// Check returns every layer violation of the non-test Go files of the module
// rooted at root (the directory holding go.mod), in file order. testdata,
// vendor, hidden and underscore directories, and nested modules are
// skipped. An error means the module could not be read or a file could not
// be parsed.
func Check(root string) ([]Violation, error) {
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	var out []Violation
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == root {
				return nil
			}
			name := d.Name()
			if name == "testdata" || name == "vendor" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		vs, err := checkFile(fset, p, filepath.ToSlash(rel), module)
		if err != nil {
			return err
		}
		out = append(out, vs...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// checkFile checks one non-test file; rel is its slash path from the root.
func checkFile(fset *token.FileSet, file, rel, module string) ([]Violation, error) {
	top, rest, _ := strings.Cut(rel, "/")
	if rest == "" {
		top = "" // a file in the module root
	}
	r, ok := rules[top]
	if !ok {
		return []Violation{{Pos: rel, Msg: "file outside the layer folders (events, domain, commands, projections, adapters, api, node, testfixtures, cmd)"}}, nil
	}
	who := top
	if a := adapterOf(path.Dir(rest)); top == "adapters" && a != "" {
		who = "adapters/" + a
	}

	src, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	mode := parser.SkipObjectResolution
	if !r.pure {
		mode |= parser.ImportsOnly
	}
	f, err := parser.ParseFile(fset, rel, src, mode)
	if err != nil {
		return nil, err
	}

	var out []Violation
	report := func(pos token.Pos, format string, args ...any) {
		p := fset.Position(pos)
		out = append(out, Violation{Pos: fmt.Sprintf("%s:%d:%d", p.Filename, p.Line, p.Column), Msg: fmt.Sprintf(format, args...)})
	}
	timeName := ""
	for _, spec := range f.Imports {
		imp, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: bad import path %s", rel, spec.Path.Value)
		}
		if imp == "time" {
			switch {
			case spec.Name == nil:
				timeName = "time"
			case spec.Name.Name == ".":
				if r.pure {
					report(spec.Pos(), "%s may not dot-import \"time\" (it hides clock reads)", who)
				}
			case spec.Name.Name != "_":
				timeName = spec.Name.Name
			}
		}
		if msg := importViolation(r, top, who, rest, imp, module); msg != "" {
			report(spec.Path.Pos(), "%s", msg)
		}
	}
	if r.pure && timeName != "" {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == timeName && clockReads[sel.Sel.Name] {
				report(sel.Pos(), "%s may not use time.%s (take now as an argument)", who, sel.Sel.Name)
			}
			return true
		})
	}
	return out, nil
}

// importViolation says what is wrong with a file of folder top (rest is its
// path below top) importing imp, or "" if nothing.
func importViolation(r rule, top, who, rest, imp, module string) string {
	internal := imp == module || strings.HasPrefix(imp, module+"/")
	if !internal {
		if isStd(imp) {
			if r.pure && !slices.Contains(r.allowStd, imp) && (impureStd[imp] || slices.ContainsFunc(impureStdTrees, func(t string) bool { return strings.HasPrefix(imp, t) })) {
				return fmt.Sprintf("%s may not import %q (no I/O, clock, randomness, logging, context or shared state)", who, imp)
			}
			return ""
		}
		if r.pure && !slices.Contains(r.allowThirdParty, imp) {
			return fmt.Sprintf("%s may not import third-party %q", who, imp)
		}
		return ""
	}

	sub := strings.TrimPrefix(strings.TrimPrefix(imp, module), "/")
	impTop, impRest, _ := strings.Cut(sub, "/")
	if impTop == "testfixtures" && top != "testfixtures" {
		return fmt.Sprintf("only _test.go files may import %q", imp)
	}
	if impTop == "node" && top != "node" && top != "cmd" {
		return fmt.Sprintf("only cmd may import %q", imp)
	}
	if r.anything {
		return ""
	}
	if impTop == top && top != "" {
		if top != "adapters" || adapterOf(impRest) == adapterOf(path.Dir(rest)) {
			return ""
		}
		return fmt.Sprintf("%s may not import %q (another adapter)", who, imp)
	}
	if impTop != "" && slices.Contains(r.layers, impTop) {
		return ""
	}
	return fmt.Sprintf("%s may not import %q", who, imp)
}

// adapterOf is the adapter a directory below adapters/ belongs to ("sqlite"
// for "sqlite" and "sqlite/migrations"); "" for adapters/ itself.
func adapterOf(dir string) string {
	if dir == "." {
		return ""
	}
	name, _, _ := strings.Cut(dir, "/")
	return name
}

// isStd reports whether an import path is in the standard library: its
// first element has no dot (and it is not the module, checked before).
func isStd(imp string) bool {
	first, _, _ := strings.Cut(imp, "/")
	return !strings.Contains(first, ".") && imp != "C"
}

// modulePath reads the module path from a go.mod file.
func modulePath(gomod string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			if p, err := strconv.Unquote(fields[1]); err == nil {
				return p, nil
			}
			return fields[1], nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// findModuleRoot returns the nearest directory at or above start that holds
// a go.mod.
func findModuleRoot(start string) (string, error) {
	dir, err := filepath.Abs(start)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod at or above %s", start)
		}
		dir = parent
	}
}
