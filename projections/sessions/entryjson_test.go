package sessions

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"

	"hermes/domain"
	"hermes/events"
)

// oracleEntry is a SessionEntry as encoding/json writes it: the export's
// shape before appendEntry wrote it by hand, kept as the reference the
// hand-written bytes must equal.
type oracleEntry struct {
	SessionKey         string         `json:"session_key"`
	SessionID          string         `json:"session_id"`
	CreatedAt          string         `json:"created_at"`
	UpdatedAt          string         `json:"updated_at"`
	DisplayName        *string        `json:"display_name"`
	Platform           *string        `json:"platform"`
	ChatType           string         `json:"chat_type"`
	InputTokens        int64          `json:"input_tokens"`
	OutputTokens       int64          `json:"output_tokens"`
	CacheReadTokens    int64          `json:"cache_read_tokens"`
	CacheWriteTokens   int64          `json:"cache_write_tokens"`
	TotalTokens        int64          `json:"total_tokens"`
	LastPromptTokens   int64          `json:"last_prompt_tokens"`
	EstimatedCostUSD   float64        `json:"estimated_cost_usd"`
	CostStatus         string         `json:"cost_status"`
	MemoryFlushed      bool           `json:"memory_flushed"`
	ExpiryFinalized    bool           `json:"expiry_finalized"`
	Suspended          bool           `json:"suspended"`
	ResumePending      bool           `json:"resume_pending"`
	ResumeReason       *string        `json:"resume_reason"`
	LastResumeMarkedAt *string        `json:"last_resume_marked_at"`
	IsFreshReset       bool           `json:"is_fresh_reset"`
	WasAutoReset       bool           `json:"was_auto_reset"`
	AutoResetReason    *string        `json:"auto_reset_reason"`
	ResetHadActivity   bool           `json:"reset_had_activity"`
	Origin             *events.Source `json:"origin"`
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// oracleJSON is the entry of l as the export wrote it with encoding/json,
// the origin read back from its column (where json.Marshal stored it).
func oracleJSON(t *rapid.T, l domain.Lane, loc *time.Location) []byte {
	column, err := json.Marshal(events.Source(l.Origin))
	if err != nil {
		t.Fatal(err)
	}
	var origin events.Source
	if err := json.Unmarshal(column, &origin); err != nil {
		t.Fatal(err)
	}
	e := oracleEntry{
		SessionKey: l.SessionKey, SessionID: l.SessionID,
		CreatedAt: PythonISO(l.CreatedAt, loc), UpdatedAt: PythonISO(l.UpdatedAt, loc),
		DisplayName: optional(l.DisplayName), Platform: optional(l.Platform), ChatType: l.ChatType,
		InputTokens: l.InputTokens, OutputTokens: l.OutputTokens, CacheReadTokens: l.CacheReadTokens,
		CacheWriteTokens: l.CacheWriteTokens, TotalTokens: l.TotalTokens, LastPromptTokens: l.LastPromptTokens,
		EstimatedCostUSD: finiteCost(l.EstimatedCostUSD), CostStatus: l.CostStatus,
		MemoryFlushed: l.ExpiryFinalized, ExpiryFinalized: l.ExpiryFinalized, Suspended: l.Suspended,
		ResumePending: l.ResumePending, ResumeReason: optional(l.ResumeReason),
		IsFreshReset: l.IsFreshReset, WasAutoReset: l.WasAutoReset, AutoResetReason: optional(l.AutoResetReason),
		ResetHadActivity: l.ResetHadActivity, Origin: &origin,
	}
	if !l.LastResumeMarkedAt.IsZero() {
		s := PythonISO(l.LastResumeMarkedAt, loc)
		e.LastResumeMarkedAt = &s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(e); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// awkwardString draws strings json must escape or may take as they are:
// HTML characters, quotes, backslashes, control characters, U+2028,
// invalid UTF-8, emoji, and plain text.
func awkwardString() *rapid.Generator[string] {
	piece := rapid.SampledFrom([]string{"", "a", "telegram", "<b>&</b>", `"`, `\`, "\n", "\t", "\x01", "\x7f",
		"\u2028", "\u2029", "\xff", "\xe2\x82", "é", "🙂", "\\u003c", "u003c", "\ufffd", " ", ":", ",", "{", "}"})
	return rapid.Custom(func(t *rapid.T) string {
		var s string
		for _, p := range rapid.SliceOfN(piece, 0, 6).Draw(t, "pieces") {
			s += p
		}
		return s
	})
}

func drawLane(t *rapid.T) domain.Lane {
	str := awkwardString()
	at := func(label string) time.Time {
		if rapid.Bool().Draw(t, label+"Zero") {
			return time.Time{}
		}
		return time.Unix(rapid.Int64Range(0, 4e9).Draw(t, label), rapid.Int64Range(0, 999_999_999).Draw(t, label+"Nanos")).UTC()
	}
	cost := rapid.SampledFrom([]float64{0, 1e-7, 1.5e-6, 0.000123, 0.1, 12.5, 1e20, 1e21, 3e22, -1, math.NaN(), math.Inf(1), domain.MaxCostUSD}).Draw(t, "costPick")
	if rapid.Bool().Draw(t, "costRandom") {
		cost = rapid.Float64Range(0, 1e6).Draw(t, "cost")
	}
	return domain.Lane{
		SessionKey: str.Draw(t, "key"), SessionID: str.Draw(t, "id"),
		CreatedAt: at("created").Add(time.Second), UpdatedAt: at("updated").Add(time.Second),
		DisplayName: str.Draw(t, "display"), Platform: str.Draw(t, "platform"), ChatType: str.Draw(t, "chatType"),
		InputTokens: rapid.Int64().Draw(t, "in"), OutputTokens: rapid.Int64().Draw(t, "out"),
		CacheReadTokens: rapid.Int64().Draw(t, "cr"), CacheWriteTokens: rapid.Int64().Draw(t, "cw"),
		TotalTokens: rapid.Int64().Draw(t, "total"), LastPromptTokens: rapid.Int64().Draw(t, "prompt"),
		EstimatedCostUSD: cost, CostStatus: str.Draw(t, "costStatus"),
		ExpiryFinalized: rapid.Bool().Draw(t, "finalized"), Suspended: rapid.Bool().Draw(t, "suspended"),
		ResumePending: rapid.Bool().Draw(t, "resume"), ResumeReason: str.Draw(t, "resumeReason"),
		LastResumeMarkedAt: at("marked"), IsFreshReset: rapid.Bool().Draw(t, "fresh"),
		WasAutoReset: rapid.Bool().Draw(t, "auto"), AutoResetReason: str.Draw(t, "autoReason"),
		ResetHadActivity: rapid.Bool().Draw(t, "activity"),
		Origin: domain.SessionSource(events.Source{
			Platform: str.Draw(t, "oPlatform"), ChatID: str.Draw(t, "oChat"), ChatName: str.Draw(t, "oChatName"),
			ChatType: str.Draw(t, "oChatType"), UserID: str.Draw(t, "oUser"), UserName: str.Draw(t, "oUserName"),
			ThreadID: str.Draw(t, "oThread"), ChatTopic: str.Draw(t, "oTopic"), UserIDAlt: str.Draw(t, "oUserAlt"),
			ChatIDAlt: str.Draw(t, "oChatAlt"), IsBot: rapid.Bool().Draw(t, "oBot"), GuildID: str.Draw(t, "oGuild"),
			ParentChatID: str.Draw(t, "oParent"), MessageID: str.Draw(t, "oMessage"),
			RoleAuthorized: rapid.Bool().Draw(t, "oRole"), Profile: str.Draw(t, "oProfile"),
			AutoThreadCreated: rapid.Bool().Draw(t, "oAutoThread"), AutoThreadInitialName: str.Draw(t, "oAutoThreadName"),
			ProspectiveThreadID: str.Draw(t, "oProspective"),
		}),
	}
}

// Given any lane, when it is written as a sessions.json entry, then the
// bytes are those encoding/json writes (no HTML escaping, indented two
// spaces under the file's own two), origin and key included.
func TestAppendEntryWritesWhatEncodingJSONWrites(t *testing.T) {
	loc := time.FixedZone("UTC+5:30", 5*3600+1800)
	rapid.Check(t, func(t *rapid.T) {
		l := drawLane(t)
		origin, err := json.Marshal(events.Source(l.Origin)) // as row.go stores it
		if err != nil {
			t.Fatal(err)
		}
		fallback := newNoEscapeEncoder()
		got, err := appendEntry(nil, &exportLane{lane: l, origin: origin}, loc, fallback)
		if err != nil {
			t.Fatal(err)
		}
		if want := oracleJSON(t, l, loc); !bytes.Equal(got, want) {
			t.Fatalf("entry =\n%s\nwant\n%s", got, want)
		}
		key, err := appendString(nil, l.SessionKey, fallback)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := fallback.encode(&want, l.SessionKey); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(key, want.Bytes()) {
			t.Fatalf("key = %s, want %s", key, want.Bytes())
		}
	})
}

// Given any float, appendFloat writes what json.Marshal writes.
func TestAppendFloatWritesWhatJSONWrites(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		f := rapid.Float64().Draw(t, "f")
		if math.IsNaN(f) || math.IsInf(f, 0) {
			t.Skip("json has no NaN or infinity")
		}
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONFloat(nil, f); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONFloat(%v) = %s, want %s", f, got, want)
		}
	})
}

// Given an origin column that is not the flat object json.Marshal writes,
// the entry still says what it holds: indentFlatObject declines and the
// column is decoded; a column that is not JSON is an error.
func TestAppendOriginDeclinesWhatItDoesNotKnow(t *testing.T) {
	for _, tc := range []struct {
		name, raw string
		wantErr   bool
	}{
		{"number value", `{"platform":"x","chat_id":"1","chat_type":"dm","is_bot":1}`, true},
		{"nested", `{"platform":{"a":"b"},"chat_id":"1"}`, true},
		{"trailing comma", `{"platform":"x",}`, true},
		{"not json", `{"platform`, true},
		{"keys out of order", `{"chat_id":"1","platform":"x","chat_type":"dm","is_bot":false,"role_authorized":false}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := appendOrigin(nil, []byte(tc.raw), newNoEscapeEncoder())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("appendOrigin(%s) = %s, want an error", tc.raw, got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(got, &back); err != nil || back["chat_id"] != "1" || back["platform"] != "x" {
				t.Fatalf("appendOrigin(%s) = %s (%v)", tc.raw, got, err)
			}
		})
	}
}
