package api_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// storedPackages are the packages whose types are the log's schema (events)
// or the rules' (domain): no request body may decode into them, or a field
// added to the API would silently change what is persisted.
var storedPackages = []string{"hermes/events", "hermes/domain"}

// decodeViolations checks the files of package api: every body is read by
// decode[T] (no other JSON decoding outside it, no decode without an
// explicit type), and no T reaches, through its fields, pointers, slices,
// maps or the package's own type declarations, a type of storedPackages.
func decodeViolations(fset *token.FileSet, files []*ast.File) []string {
	types := map[string]ast.Expr{}
	stored := map[string]bool{}
	for _, f := range files {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(storedPackages, path) {
				continue
			}
			name := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			stored[name] = true
		}
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					types[ts.Name.Name] = ts.Type
				}
			}
		}
	}
	var reaches func(e ast.Expr, seen map[string]bool) string
	reaches = func(e ast.Expr, seen map[string]bool) string {
		switch e := e.(type) {
		case *ast.SelectorExpr:
			if pkg, ok := e.X.(*ast.Ident); ok && stored[pkg.Name] {
				return pkg.Name + "." + e.Sel.Name
			}
		case *ast.Ident:
			if t, ok := types[e.Name]; ok && !seen[e.Name] {
				seen[e.Name] = true
				return reaches(t, seen)
			}
		case *ast.StarExpr:
			return reaches(e.X, seen)
		case *ast.ParenExpr:
			return reaches(e.X, seen)
		case *ast.ArrayType:
			return reaches(e.Elt, seen)
		case *ast.MapType:
			if found := reaches(e.Key, seen); found != "" {
				return found
			}
			return reaches(e.Value, seen)
		case *ast.IndexExpr:
			if found := reaches(e.X, seen); found != "" {
				return found
			}
			return reaches(e.Index, seen)
		case *ast.StructType:
			for _, f := range e.Fields.List {
				if found := reaches(f.Type, seen); found != "" {
					return found
				}
			}
		}
		return ""
	}
	var out []string
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				pos := fset.Position(call.Pos())
				where := filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)
				switch fun := call.Fun.(type) {
				case *ast.IndexExpr:
					if id, ok := fun.X.(*ast.Ident); ok && id.Name == "decode" {
						if found := reaches(fun.Index, map[string]bool{}); found != "" {
							out = append(out, where+": a request body decodes into "+found)
						}
					}
				case *ast.Ident:
					if fun.Name == "decode" {
						out = append(out, where+": decode without an explicit request type")
					}
				case *ast.SelectorExpr:
					if pkg, ok := fun.X.(*ast.Ident); ok && (pkg.Name == "json" || pkg.Name == "jsonv2") &&
						slices.Contains(jsonDecoders, fun.Sel.Name) && fn.Name.Name != "decode" {
						out = append(out, where+": "+pkg.Name+"."+fun.Sel.Name+" outside decode")
					}
				}
				return true
			})
		}
	}
	return out
}

// jsonDecoders are the functions of encoding/json and JSON v2 that decode
// into a Go value.
var jsonDecoders = []string{"Unmarshal", "NewDecoder", "UnmarshalRead", "UnmarshalDecode"}

func parseSources(t *testing.T, fset *token.FileSet, sources map[string]string) []*ast.File {
	t.Helper()
	var files []*ast.File
	for name, src := range sources {
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		files = append(files, f)
	}
	return files
}

// TestNoStoredTypeDecoded: package api decodes request bodies only into its
// own request types.
func TestNoStoredTypeDecoded(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sources := map[string]string{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		sources[name] = string(data)
	}
	fset := token.NewFileSet()
	if v := decodeViolations(fset, parseSources(t, fset, sources)); len(v) > 0 {
		t.Errorf("request bodies decoded into stored types:\n%s", strings.Join(v, "\n"))
	}
}

// TestNoStoredTypeDecoded_Catches: the check refuses what the API used to
// do, and the ways around decode.
func TestNoStoredTypeDecoded_Catches(t *testing.T) {
	const header = "package api\nimport (\n\"encoding/json\"\n\"hermes/events\"\nev \"hermes/events\"\n\"hermes/domain\"\n)\n"
	tests := []struct {
		name string
		src  string
		want string
	}{
		{"an event type", `func h(r *http.Request) { m, _ := decode[events.Message](r, false); _ = m }`, "decodes into events.Message"},
		{"an event type, renamed import", `func h(r *http.Request) { m, _ := decode[ev.Message](r, false); _ = m }`, "decodes into ev.Message"},
		{"an event type in a field", `type req struct{ M *[]events.Message }
func h(r *http.Request) { m, _ := decode[req](r, false); _ = m }`, "decodes into events.Message"},
		{"a domain type two types down", `type src struct{ S map[string]domain.SessionSource }
type req struct{ Source []src }
func h(r *http.Request) { m, _ := decode[req](r, false); _ = m }`, "decodes into domain.SessionSource"},
		{"an alias of an event type", `type req = events.Message
func h(r *http.Request) { m, _ := decode[req](r, false); _ = m }`, "decodes into events.Message"},
		{"the old untyped decode", `func h(r *http.Request) { var m events.Message; decode(r, &m, false) }`, "decode without an explicit request type"},
		{"json beside decode", `func h(r *http.Request) { var m events.Message; json.NewDecoder(r.Body).Decode(&m) }`, "json.NewDecoder outside decode"},
		{"json.Unmarshal", `func h(b []byte) { var m events.Message; json.Unmarshal(b, &m) }`, "json.Unmarshal outside decode"},
		{"JSON v2's Unmarshal", `func h(b []byte) { var m events.Message; jsonv2.Unmarshal(b, &m) }`, "jsonv2.Unmarshal outside decode"},
		{"JSON v2's UnmarshalRead", `func h(r *http.Request) { var m events.Message; jsonv2.UnmarshalRead(r.Body, &m) }`, "jsonv2.UnmarshalRead outside decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fset := token.NewFileSet()
			v := decodeViolations(fset, parseSources(t, fset, map[string]string{"x.go": header + tt.src}))
			if len(v) != 1 || !strings.Contains(v[0], tt.want) {
				t.Errorf("violations = %q, want one with %q", v, tt.want)
			}
		})
	}
	fset := token.NewFileSet()
	ok := `type req struct{ Source *struct{ Platform string } }
func h(r *http.Request) { m, _ := decode[req](r, false); _ = m }`
	if v := decodeViolations(fset, parseSources(t, fset, map[string]string{"x.go": header + ok})); len(v) != 0 {
		t.Errorf("violations of an API-owned request = %q, want none", v)
	}
}
