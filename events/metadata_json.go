package events

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// AppendJSON appends m as JSON to b: the bytes json.Marshal(m) gives, made
// without reflection when every field is plain printable ASCII (command
// names and ids, node names), as the store encodes the metadata of every
// event it appends; any other text goes through json.Marshal.
func (m Metadata) AppendJSON(b []byte) ([]byte, error) {
	fields := [...]struct{ name, value string }{
		{"command", m.Command},
		{"command_id", m.CommandID},
		{"correlation_id", m.CorrelationID},
		{"node", m.Node},
		{"gateway_run", m.GatewayRun},
		{"redacted", m.Redacted},
	}
	for _, f := range fields {
		if !plainJSON(f.value) {
			out, err := json.Marshal(m)
			if err != nil {
				return b, fmt.Errorf("encode metadata: %w", err)
			}
			return append(b, out...), nil
		}
	}
	b = append(b, `{"schema_version":`...)
	b = strconv.AppendInt(b, int64(m.SchemaVersion), 10)
	for _, f := range fields {
		if f.value == "" {
			continue // omitempty
		}
		b = append(b, `,"`...)
		b = append(b, f.name...)
		b = append(b, `":"`...)
		b = append(b, f.value...)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

// plainJSON reports whether json.Marshal writes every byte of s as itself
// inside a string: printable ASCII other than the quote, the backslash and
// the characters it escapes for HTML (<, >, &).
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}
