package kurrentdb

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"hermes/events"

	"github.com/google/uuid"
)

// BenchmarkSealMessage is the CPU an append pays for sealing one 1 KiB
// message, without the network: the class, the shadow's encoding, AES-GCM
// and the metadata (the key is remembered, as on every append after a
// stream's first).
func BenchmarkSealMessage(b *testing.B) {
	content, _ := json.Marshal(strings.Repeat("hello world ", 86)[:1024])
	p := []events.Proposed{{ID: uuid.NewString(), Event: events.MessageAppended{SessionID: "s", Message: events.Message{Role: "user", Content: content}, At: time.Now()},
		Metadata: events.Metadata{SchemaVersion: 1, Command: "append_message"}}}
	data, err := encode("transcript-s", p)
	if err != nil {
		b.Fatal(err)
	}
	key, _ := newKey()
	k := streamKey{rev: 0, key: key}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		plan := planSeal(p)
		shadow, err := events.Encode(plan.shadows[0])
		if err != nil {
			b.Fatal(err)
		}
		if _, err := sealEvent(k, "transcript-s", data[0], data[0].Data); err != nil {
			b.Fatal(err)
		}
		if _, err := json.Marshal(storedMetadata{Metadata: p[0].Metadata, Sealed: &sealedPart{Class: plan.classes[0]}, Shadow: shadow}); err != nil {
			b.Fatal(err)
		}
	}
}
