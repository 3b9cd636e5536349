package fts5

import (
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
)

// TestParseFastQuery: the queries the Ranker ranks, and those it leaves
// to SQLite.
func TestParseFastQuery(t *testing.T) {
	for _, tc := range []struct {
		tok   Tokenizer
		query string
		want  *fastQuery // nil: refused
	}{
		{Unicode61, "Docker", &fastQuery{phrases: []ftsPhrase{{terms: []string{"docker"}}}}},
		{Unicode61, "deploy*", &fastQuery{phrases: []ftsPhrase{{terms: []string{"deploy"}, prefix: true}}}},
		{Unicode61, `"memory leak"`, &fastQuery{phrases: []ftsPhrase{{terms: []string{"memory", "leak"}}}}},
		{Unicode61, "redis OR memcached", &fastQuery{or: true, phrases: []ftsPhrase{{terms: []string{"redis"}}, {terms: []string{"memcached"}}}}},
		{Unicode61, "a AND b c", &fastQuery{phrases: []ftsPhrase{{terms: []string{"a"}}, {terms: []string{"b"}}, {terms: []string{"c"}}}}},
		{Unicode61, "a NOT b", nil},
		{Unicode61, "a OR b c", nil}, // AND and OR mixed
		{Unicode61, "OR a", nil},     // an operator without two sides
		{Unicode61, "a OR", nil},     // an operator without two sides
		{Unicode61, "a b OR", nil},
		{Unicode61, "a OR b OR", nil},
		{Unicode61, "a OR OR b", nil},
		{Unicode61, "AND", nil},
		{Unicode61, `"read_file"`, &fastQuery{phrases: []ftsPhrase{{terms: []string{"read", "file"}}}}},
		{Unicode61, `"Docker-Compose up"`, &fastQuery{phrases: []ftsPhrase{{terms: []string{"docker", "compose", "up"}}}}},
		{Unicode61, `"--"`, nil},
		{Unicode61, "read_file", nil},
		{Unicode61, `"café au lait"`, nil},
		{Unicode61, "café", nil}, // folding and diacritics
		{Unicode61, `"ab"*`, nil},
		{Unicode61, "de*ploy", nil},
		{Unicode61, `"记忆断"`, nil},
		{Trigram, `"记忆断裂"`, &fastQuery{phrases: []ftsPhrase{{terms: []string{"记忆断", "忆断裂"}}}}},
		{Trigram, `"记忆" "断裂问"`, nil},
		{Trigram, `"记忆a断"`, nil},
	} {
		got, ok := parseFastQuery(tc.tok, tc.query)
		if tc.want == nil {
			if ok {
				t.Errorf("parseFastQuery(%d, %q) = %+v, want refused", tc.tok, tc.query, got)
			}
			continue
		}
		if !ok {
			t.Errorf("parseFastQuery(%d, %q) refused, want %+v", tc.tok, tc.query, *tc.want)
			continue
		}
		if diff := gocmp.Diff(*tc.want, got, gocmp.AllowUnexported(fastQuery{}, ftsPhrase{})); diff != "" {
			t.Errorf("parseFastQuery(%d, %q) (-want +got):\n%s", tc.tok, tc.query, diff)
		}
	}
}
