package transcripts

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"hermes/events"
)

// searchCorpus: three sessions of three sources.
func searchCorpus(t *testing.T) *Projection {
	t.Helper()
	p := openTemp(t)
	h := newHistory()
	open := func(key, id, platform string, n int) {
		e := created(key, id, at(n))
		e.Platform = platform
		h.lane(key, e)
	}
	open("kcli", "cli1", "cli", 0)
	open("ktg", "tg1", "telegram", 100)
	open("kdc", "dc1", "discord", 200)
	h.tr("cli1",
		appended("cli1", text("user", "How do I fix the docker build?"), at(1)),                                    // id 1
		appended("cli1", text("assistant", "Run docker compose build again. "+strings.Repeat("x", 300)), at(2)),    // id 2
		appended("cli1", events.Message{Role: "tool", Content: jsonString("exit 0"), ToolName: "terminal"}, at(3)), // id 3
		events.SessionMetadataUpdated{SessionID: "cli1", Model: ptr("claude"), At: at(4)},
	)
	h.tr("tg1",
		appended("tg1", text("user", "docker again, on telegram"), at(101)),                                                                  // id 4
		appended("tg1", text("user", "我们讨论了记忆断裂的问题"), at(102)),                                                                               // id 5
		appended("tg1", text("user", "任务100%完成了"), at(103)),                                                                                  // id 6
		appended("tg1", text("user", "任务100X完成了"), at(104)),                                                                                  // id 7
		appended("tg1", text("user", "记忆 断裂"), at(105)),                                                                                      // id 8
		appended("tg1", events.Message{Role: "user", Content: raw(`[{"type":"text","text":"see"},{"type":"text","text":"this"}]`)}, at(106)), // id 9
	)
	h.tr("dc1",
		appended("dc1", events.Message{Role: "assistant", Content: raw(`null`),
			ToolCalls: raw(`[{"id":"c","function":{"name":"todo","arguments":"{\"item\":\"完成\"}"}}]`)}, at(201)), // 13
		appended("dc1", events.Message{Role: "user", Content: raw(`[{"type":"image_url","image_url":{"url":"u"}}]`)}, at(202)), // id 10
		appended("dc1", text("user", "chat-send is broken in docker"), at(203)),                                                // id 11
	)
	mustApply(t, p, h.all)
	return p
}

func search(t *testing.T, p *Projection, q SearchQuery) []SearchResult {
	t.Helper()
	res, err := p.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v) error = %v", q, err)
	}
	return res
}

func ids(res []SearchResult) []int64 {
	out := []int64{}
	for _, r := range res {
		out = append(out, r.ID)
	}
	slices.Sort(out)
	return out
}

func TestSearchFilters(t *testing.T) {
	p := searchCorpus(t)
	for _, tc := range []struct {
		name string
		q    SearchQuery
		want []int64
	}{
		{"all sources by default", SearchQuery{Query: "docker"}, []int64{1, 2, 4, 12}},
		{"empty source list matches nothing", SearchQuery{Query: "docker", Sources: []string{}}, []int64{}},
		{"sources", SearchQuery{Query: "docker", Sources: []string{"cli", "discord"}}, []int64{1, 2, 12}},
		{"empty exclusion excludes nothing", SearchQuery{Query: "docker", ExcludeSources: []string{}}, []int64{1, 2, 4, 12}},
		{"exclusion", SearchQuery{Query: "docker", ExcludeSources: []string{"telegram", "discord"}}, []int64{1, 2}},
		{"roles", SearchQuery{Query: "docker", Roles: []string{"user"}}, []int64{1, 4, 12}},
		{"empty roles match all", SearchQuery{Query: "docker", Roles: []string{}}, []int64{1, 2, 4, 12}},
		{"tool name is indexed", SearchQuery{Query: "terminal"}, []int64{3}},
		{"tool calls are indexed", SearchQuery{Query: "todo"}, []int64{10}},
		{"hyphenated term", SearchQuery{Query: "chat-send"}, []int64{12}},
		{"limit", SearchQuery{Query: "docker", Limit: 2}, nil},
	} {
		got := ids(search(t, p, tc.q))
		if tc.want == nil {
			if len(got) != 2 {
				t.Errorf("%s: %d results, want 2", tc.name, len(got))
			}
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", tc.name, diff)
		}
	}
	first := search(t, p, SearchQuery{Query: "docker", Limit: 2})
	rest := search(t, p, SearchQuery{Query: "docker", Limit: 2, Offset: 2})
	if got := ids(append(first, rest...)); !slices.Equal(got, []int64{1, 2, 4, 12}) {
		t.Errorf("two pages = %v, want all four matches", got)
	}
}

func TestSearchResultFields(t *testing.T) {
	p := searchCorpus(t)
	res := search(t, p, SearchQuery{Query: "fix", Sources: []string{"cli"}})
	if len(res) != 1 {
		t.Fatalf("Search(fix) = %d results, want 1", len(res))
	}
	long := "Run docker compose build again. " + strings.Repeat("x", 300)
	want := SearchResult{
		ID: 1, SessionID: "cli1", Role: "user", Snippet: "How do I >>>fix<<< the docker build?  ", // content, tool name, tool calls
		Timestamp: unixSeconds(at(1)), Source: "cli", Model: ptr("claude"), SessionStarted: unixSeconds(at(0)),
		Context: []ContextEntry{
			{Role: "user", Content: "How do I fix the docker build?"},
			{Role: "assistant", Content: long[:200]},
		},
	}
	if diff := cmp.Diff(want, res[0]); diff != "" {
		t.Errorf("Search(fix) (-want +got):\n%s", diff)
	}
	res = search(t, p, SearchQuery{Query: "compose"})
	if len(res) != 1 || len(res[0].Context) != 3 || res[0].Context[2] != (ContextEntry{Role: "tool", Content: "exit 0"}) {
		t.Errorf("Search(compose) context = %+v, want previous, match and next", res)
	}
	if !strings.HasPrefix(res[0].Snippet, "Run docker >>>compose<<< build again. xxx") {
		t.Errorf("Search(compose) snippet = %q, want the match marked", res[0].Snippet)
	}
	res = search(t, p, SearchQuery{Query: "broken"})
	if len(res) != 1 || res[0].Context[0] != (ContextEntry{Role: "user", Content: "[multimodal content]"}) {
		t.Errorf("Search(broken) context = %+v, want the image-only message as [multimodal content]", res)
	}
	res = search(t, p, SearchQuery{Query: "this"})
	if len(res) != 1 || res[0].Context[1] != (ContextEntry{Role: "user", Content: "see this"}) {
		t.Errorf("Search(this) context = %+v, want the text parts joined by a space", res)
	}
}

func TestSearchCJK(t *testing.T) {
	p := searchCorpus(t)
	// Four CJK characters: the trigram index, phrase semantics.
	res := search(t, p, SearchQuery{Query: "记忆断裂"})
	if got := ids(res); !slices.Equal(got, []int64{5}) {
		t.Fatalf("Search(记忆断裂) = %v, want [5] (not the split 记忆 断裂)", got)
	}
	if !strings.Contains(res[0].Snippet, ">>>记忆断裂<<<") {
		t.Errorf("trigram snippet = %q, want the match marked", res[0].Snippet)
	}
	// Two CJK characters: the LIKE path, with % literal.
	res = search(t, p, SearchQuery{Query: "100%完成"})
	if got := ids(res); !slices.Equal(got, []int64{6}) {
		t.Fatalf("Search(100%%完成) = %v, want [6] only (%% is literal)", got)
	}
	if res[0].Snippet != "任务100%完成了" {
		t.Errorf("LIKE snippet = %q, want the content around the term", res[0].Snippet)
	}
	// Short terms are ORed, newest first, and also match tool calls.
	res = search(t, p, SearchQuery{Query: "完成 OR 记忆"})
	got := []int64{}
	for _, r := range res {
		got = append(got, r.ID)
	}
	if diff := cmp.Diff([]int64{10, 8, 7, 6, 5}, got); diff != "" {
		t.Errorf("Search(完成 OR 记忆) ids newest first (-want +got):\n%s", diff)
	}
	if res[0].Snippet != "" {
		t.Errorf("snippet of a match in tool calls only = %q, want empty", res[0].Snippet)
	}
	// Filters apply on both CJK paths.
	if res := search(t, p, SearchQuery{Query: "记忆断裂", Sources: []string{"cli"}}); len(res) != 0 {
		t.Errorf("Search(记忆断裂, cli) = %d results, want none", len(res))
	}
	if res := search(t, p, SearchQuery{Query: "完成", Roles: []string{"assistant"}}); !slices.Equal(ids(res), []int64{10}) {
		t.Errorf("Search(完成, assistant) = %v, want [10]", ids(res))
	}
}

// A colon is FTS5's column filter; as in Hermes it is blanked out, so
// "TODO: fix" finds the message instead of asking for a column named TODO.
func TestSearchColon(t *testing.T) {
	p := openTemp(t)
	h := newHistory()
	h.lane("k", created("k", "s1", at(0)))
	h.tr("s1", appended("s1", text("user", "TODO fix the deployment script"), at(1)))
	mustApply(t, p, h.all)
	for _, q := range []string{"TODO: fix", "TODO:fix", "deployment: script"} {
		if got := ids(search(t, p, SearchQuery{Query: q})); !slices.Equal(got, []int64{1}) {
			t.Errorf("Search(%q) = %v, want [1]", q, got)
		}
	}
}

func TestSearchJunkIsEmptyNotAnError(t *testing.T) {
	p := searchCorpus(t)
	for _, q := range []string{"", "   ", `"`, `***`, `a AND OR b`, `AND OR`, `NOT`, `(`, `docker NEAR(`} {
		res, err := p.Search(context.Background(), SearchQuery{Query: q})
		if err != nil || len(res) != 0 {
			t.Errorf("Search(%q) = %d results, %v, want none and no error", q, len(res), err)
		}
	}
	// An unmatched quote is dropped, not an error: "记忆 is a LIKE search.
	if got := ids(search(t, p, SearchQuery{Query: `"记忆`})); !slices.Equal(got, []int64{5, 8}) {
		t.Errorf(`Search("记忆) = %v, want [5 8]`, got)
	}
}
