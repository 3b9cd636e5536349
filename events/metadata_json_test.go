package events_test

import (
	"encoding/json"
	"testing"

	"hermes/events"
)

// TestMetadataAppendJSON: the metadata's own encoder writes exactly what
// json.Marshal writes, for plain fields and for text json.Marshal escapes.
func TestMetadataAppendJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		md   events.Metadata
	}{
		{"schema version only", events.Metadata{SchemaVersion: 1}},
		{"zero", events.Metadata{}},
		{"sweep", events.Metadata{SchemaVersion: 2, Command: "suspend_recently_active", CommandID: "0199b3c2-7d4e-7a10-8f3e-1c2d3e4f5a6b"}},
		{"every field", events.Metadata{SchemaVersion: 3, Command: "c", CommandID: "id/with/slashes", CorrelationID: "corr", Node: "n1", GatewayRun: "default/run-1", Redacted: "er_1"}},
		{"quote and backslash", events.Metadata{SchemaVersion: 1, CommandID: `a"b\c`}},
		{"html characters", events.Metadata{SchemaVersion: 1, CommandID: "<a&b>"}},
		{"control and non-ASCII", events.Metadata{SchemaVersion: 1, Command: "tab\there", Node: "nœud\u2028"}},
		{"invalid UTF-8", events.Metadata{SchemaVersion: 1, CorrelationID: "bad\xffbyte"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.md)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tc.md.AppendJSON([]byte("prefix"))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != "prefix"+string(want) {
				t.Errorf("AppendJSON = %s, want prefix%s", got, want)
			}
		})
	}
}

func FuzzMetadataAppendJSON(f *testing.F) {
	f.Add(1, "resolve_session", "0199b3c2-7d4e-7a10-8f3e-1c2d3e4f5a6b", "", "node-1", "")
	f.Add(0, "<", `"\`, "\x00", "é", "\xff")
	f.Fuzz(func(t *testing.T, v int, command, commandID, correlation, node, redacted string) {
		md := events.Metadata{SchemaVersion: v, Command: command, CommandID: commandID, CorrelationID: correlation, Node: node, GatewayRun: node + "/" + correlation, Redacted: redacted}
		want, err := json.Marshal(md)
		if err != nil {
			t.Fatal(err)
		}
		got, err := md.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendJSON = %s, want %s", got, want)
		}
	})
}
