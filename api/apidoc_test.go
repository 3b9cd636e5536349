package api_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// apiDocPath is the HTTP contract written for people.
const apiDocPath = "../docs/API.md"

// routeItem is one "METHOD /path" of a route heading.
var routeItem = regexp.MustCompile("^`(GET|HEAD|POST|PUT|PATCH|DELETE|OPTIONS) (/[^`\\s]*)`$")

// docRoutes reads the route headings of an API document: a level-3
// heading that starts with a backtick names routes, one or more of
// "`METHOD /path`" separated by commas ("### `GET /ui`, `GET /ui/`").
// It returns each route with the line that names it, and the headings
// that start like one but are not.
func docRoutes(doc []byte) (routes map[string]int, malformed []string) {
	routes = map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(doc))
	for n := 1; sc.Scan(); n++ {
		heading, ok := strings.CutPrefix(sc.Text(), "### `")
		if !ok {
			continue
		}
		for _, item := range strings.Split("`"+heading, ", ") {
			m := routeItem.FindStringSubmatch(strings.TrimSpace(item))
			if m == nil {
				malformed = append(malformed, fmt.Sprintf("line %d: %q", n, sc.Text()))
				continue
			}
			route := m[1] + " " + m[2]
			if first, dup := routes[route]; dup {
				malformed = append(malformed, fmt.Sprintf("line %d: %s has a heading already at line %d", n, route, first))
			}
			routes[route] = n
		}
	}
	return routes, malformed
}

// TestDocRoutes: the headings the parser takes as routes, and those it
// refuses.
func TestDocRoutes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		doc           string
		want          []string
		wantMalformed int
	}{
		{"one route", "### `GET /healthz`\n", []string{"GET /healthz"}, 0},
		{"two in one heading", "### `GET /ui`, `GET /ui/`\n", []string{"GET /ui", "GET /ui/"}, 0},
		{"path parameters", "### `DELETE /v1/sessions/{key}/queue`\n", []string{"DELETE /v1/sessions/{key}/queue"}, 0},
		{"prose headings and text are not routes", "## Session lanes\n### Event stream\nSee `GET /v1/events`.\n#### `GET /x`\n", nil, 0},
		{"a lower-case method", "### `get /healthz`\n", nil, 1},
		{"text after the route", "### `GET /healthz` (no token)\n", nil, 1},
		{"no path", "### `GET`\n", nil, 1},
		{"twice", "### `GET /a`\n\n### `GET /a`\n", []string{"GET /a"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			routes, malformed := docRoutes([]byte(tc.doc))
			var got []string
			for r := range routes {
				got = append(got, r)
			}
			slices.Sort(got)
			if diff := gocmp.Diff(tc.want, got); diff != "" {
				t.Errorf("docRoutes(%q) routes (-want +got):\n%s", tc.doc, diff)
			}
			if len(malformed) != tc.wantMalformed {
				t.Errorf("docRoutes(%q) malformed = %q, want %d of them", tc.doc, malformed, tc.wantMalformed)
			}
		})
	}
}

// TestAPIDocMatchesRouter: docs/API.md has a heading for every route the
// router serves and every operation of openapi.json (which
// TestOpenAPIMatchesRouter holds to the router), and names no route that
// is neither.
func TestAPIDocMatchesRouter(t *testing.T) {
	doc, err := os.ReadFile(apiDocPath)
	if err != nil {
		t.Fatalf("read %s: %v", apiDocPath, err)
	}
	routes, malformed := docRoutes(doc)
	for _, m := range malformed {
		t.Errorf("%s: malformed route heading %s (want ### `METHOD /path`[, `METHOD /path`…])", apiDocPath, m)
	}
	if len(routes) == 0 {
		t.Fatalf("%s names no route", apiDocPath)
	}
	served := served(t, newHarness(t))
	_, openAPI := openAPIDoc(t)
	documented := documented(openAPI)

	for route := range served {
		if _, ok := routes[route]; !ok {
			t.Errorf("served route %s has no heading in %s", route, apiDocPath)
		}
	}
	for op := range documented {
		if _, ok := routes[op]; !ok {
			t.Errorf("openapi.json operation %s has no heading in %s", op, apiDocPath)
		}
	}
	for route, line := range routes {
		if !served[route] {
			t.Errorf("%s:%d names %s, which the router does not serve", apiDocPath, line, route)
		}
	}
}
