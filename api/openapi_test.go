package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// openAPIDoc reads api/openapi.json, the hand-written description of the
// API.
func openAPIDoc(t *testing.T) (raw []byte, doc map[string]any) {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatalf("read openapi.json: %v", err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("openapi.json does not parse as JSON: %v", err)
	}
	return raw, doc
}

var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// documented lists "METHOD /path" of every operation of the document.
func documented(doc map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		item, _ := item.(map[string]any)
		for _, m := range methods {
			if op, ok := item[m].(map[string]any); ok {
				out[strings.ToUpper(m)+" "+path] = op
			}
		}
	}
	return out
}

// served lists "METHOD /pattern" of every route the real router serves,
// walked with chi.Walk on the router of a fully wired server (metrics,
// transcripts and the manual clock all on).
func served(t *testing.T, h *harness) map[string]bool {
	t.Helper()
	routes, ok := h.server.Handler().(chi.Routes)
	if !ok {
		t.Fatalf("(*api.Server).Handler() is a %T, not a chi.Routes", h.server.Handler())
	}
	out := map[string]bool{}
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		out[method+" "+route] = true
		return nil
	})
	if err != nil {
		t.Fatalf("chi.Walk() = %v", err)
	}
	return out
}

func TestOpenAPIDocument(t *testing.T) {
	raw, doc := openAPIDoc(t)
	if doc["openapi"] != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", doc["openapi"])
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] == nil || info["version"] == nil {
		t.Errorf("info = %v, want title and version", info)
	}
	components, _ := doc["components"].(map[string]any)
	schemes, _ := components["securitySchemes"].(map[string]any)
	if b, _ := schemes["bearer"].(map[string]any); b["type"] != "http" || b["scheme"] != "bearer" {
		t.Errorf("securitySchemes.bearer = %v, want type http, scheme bearer", schemes["bearer"])
	}
	schemas, _ := components["schemas"].(map[string]any)
	errSchema, _ := schemas["Error"].(map[string]any)
	props, _ := errSchema["properties"].(map[string]any)
	inner, _ := props["error"].(map[string]any)
	innerProps, _ := inner["properties"].(map[string]any)
	if innerProps["code"] == nil || innerProps["message"] == nil {
		t.Errorf("components.schemas.Error = %v, want {error: {code, message}}", errSchema)
	}

	// Every $ref points into the document.
	for _, m := range regexp.MustCompile(`"\$ref":\s*"([^"]*)"`).FindAllSubmatch(raw, -1) {
		ref := string(m[1])
		var node any = doc
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			obj, _ := node.(map[string]any)
			node = obj[part]
		}
		if !strings.HasPrefix(ref, "#/") || node == nil {
			t.Errorf("$ref %q does not resolve", ref)
		}
	}

	// Every operation answers something, and every protected one documents
	// the error shape of 400, 401 and 500 (and 413 when it takes a body).
	for name, op := range documented(doc) {
		responses, _ := op["responses"].(map[string]any)
		ok := false
		for code := range responses {
			ok = ok || strings.HasPrefix(code, "2")
		}
		if !ok {
			t.Errorf("%s documents no 2xx answer", name)
		}
		if security, set := op["security"].([]any); set && len(security) == 0 {
			continue
		}
		want := []string{"400", "401", "500"}
		if op["requestBody"] != nil {
			want = append(want, "413")
		}
		for _, code := range want {
			if r, _ := responses[code].(map[string]any); r["$ref"] == nil {
				t.Errorf("%s does not document %s with the error shape", name, code)
			}
		}
	}
}

// TestOpenAPIMatchesRouter: every route+method the router serves is in the
// document, and every documented path+method is served; path parameters
// are named alike in both.
func TestOpenAPIMatchesRouter(t *testing.T) {
	_, doc := openAPIDoc(t)
	h := newHarness(t)
	routes := served(t, h)
	ops := documented(doc)

	for route := range routes {
		if _, ok := ops[route]; !ok {
			t.Errorf("served route %s is not in openapi.json", route)
		}
	}
	for op := range ops {
		if !routes[op] {
			t.Errorf("documented operation %s is not served", op)
		}
	}

	// Each {param} of a path is declared as a path parameter, at the path
	// or the operation, and nothing else is.
	paths, _ := doc["paths"].(map[string]any)
	components, _ := doc["components"].(map[string]any)
	shared, _ := components["parameters"].(map[string]any)
	resolve := func(p any) map[string]any {
		m, _ := p.(map[string]any)
		if ref, ok := m["$ref"].(string); ok {
			m, _ = shared[strings.TrimPrefix(ref, "#/components/parameters/")].(map[string]any)
		}
		return m
	}
	for name, op := range ops {
		path := strings.SplitN(name, " ", 2)[1]
		var want []string
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(path, -1) {
			want = append(want, m[1])
		}
		item, _ := paths[path].(map[string]any)
		var declared []any
		if ps, ok := item["parameters"].([]any); ok {
			declared = append(declared, ps...)
		}
		if ps, ok := op["parameters"].([]any); ok {
			declared = append(declared, ps...)
		}
		var got []string
		for _, p := range declared {
			if p := resolve(p); p["in"] == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %v is not required", name, p["name"])
				}
				got = append(got, p["name"].(string))
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s declares path parameters %v, want %v", name, got, want)
		}
	}
}

// TestOpenAPIServed is the golden test: GET /openapi.json is the file,
// with the token when one is set.
func TestOpenAPIServed(t *testing.T) {
	raw, _ := openAPIDoc(t)
	h := newHarness(t, withToken("tok"))
	if r := h.send(request{method: "GET", path: "/openapi.json", noAuth: true}); r.status != http.StatusUnauthorized {
		t.Fatalf("GET /openapi.json without the token = %d, want 401", r.status)
	}
	r := h.send(request{method: "GET", path: "/openapi.json"})
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json = %d %q, want 200 application/json", r.status, r.header.Get("Content-Type"))
	}
	if !bytes.Equal(r.body, raw) {
		t.Errorf("GET /openapi.json = %d bytes that differ from openapi.json (%d bytes)", len(r.body), len(raw))
	}
}
