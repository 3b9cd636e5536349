package kurrentdb

import (
	"testing"
	"time"
)

// TestSealedMembersRoundTrip: the members a sealed copied event adds to
// its metadata come out again leaving the event's own text byte for byte.
func TestSealedMembersRoundTrip(t *testing.T) {
	at := time.Date(2025, 7, 1, 12, 0, 0, 123456789, time.UTC)
	for _, given := range []string{`{}`, `{ }`, `{"schema_version":1}`, `{"schema_version":1, "command":"x" }`,
		`{"a":{"hermes_sealed":[1,2]},"b":"}"}`, "{\n\t\"a\": 1\n}"} {
		t.Run(given, func(t *testing.T) {
			// When a record is sealed and written.
			sealed, err := withMembers([]byte(given), `"hermes_sealed":{"class":"messages","key":3}`, `"hermes_shadow":{"said":"}"}`)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := withRecordedAt(sealed, at)
			if err != nil {
				t.Fatal(err)
			}
			// Then it reads back as given, with its key, shadow and time.
			meta, gotAt, ok := splitRecordedAt(stored)
			if !ok || !gotAt.Equal(at) {
				t.Fatalf("splitRecordedAt(%s) = %v, %v; want %v", stored, gotAt, ok, at)
			}
			own, sp, shadow, ok, err := splitSealed(meta)
			if err != nil || !ok {
				t.Fatalf("splitSealed(%s) = ok %v, %v", meta, ok, err)
			}
			if string(own) != given || sp.Class != "messages" || sp.Key != 3 || string(shadow) != `{"said":"}"}` {
				t.Errorf("splitSealed(%s) = %s, %+v, %s; want %s, messages@3, the shadow", meta, own, sp, shadow, given)
			}
		})
	}
	if own, _, _, ok, err := splitSealed([]byte(`{"schema_version":1}`)); ok || err != nil || string(own) != `{"schema_version":1}` {
		t.Errorf("splitSealed(unsealed) = %s, %v, %v; want it unchanged", own, ok, err)
	}
	if _, _, _, _, err := splitSealed([]byte(`{"hermes_sealed":{"class":"c","key":0},"hermes_shadow":{},"later":1}`)); err == nil {
		t.Error("splitSealed(a member after the sealed ones) error = nil, want one")
	}
}
