package events

import "strings"

// Stream name prefixes. A lane stream holds the lifecycle of one session key;
// a transcript stream the messages of one session id; the gateway stream the
// starts, drains and stops of the process.
const (
	LanePrefix       = "lane-"
	TranscriptPrefix = "transcript-"
	GatewayStream    = "gateway"
)

// GatewayStreamOf is the gateway stream of one node among several sharing a
// store: gateway-<node>. A single node (node "") keeps [GatewayStream].
func GatewayStreamOf(node string) string {
	if node == "" {
		return GatewayStream
	}
	return GatewayStream + "-" + node
}

// IsGatewayStream reports whether stream is a gateway stream (of any node).
func IsGatewayStream(stream string) bool {
	return stream == GatewayStream || strings.HasPrefix(stream, GatewayStream+"-")
}

// LaneStream is the name of the lifecycle stream of a session key.
func LaneStream(sessionKey string) string { return LanePrefix + sessionKey }

// TranscriptStream is the name of the transcript stream of a session id.
func TranscriptStream(sessionID string) string { return TranscriptPrefix + sessionID }

// SessionKeyOf returns the session key of a lane stream name, and false for
// any other stream.
func SessionKeyOf(stream string) (string, bool) {
	return strings.CutPrefix(stream, LanePrefix)
}
