package events

// Classes of personal content, for a store that cannot rewrite an event
// and erases by destroying a key instead (crypto-shredding, the KurrentDB
// store; docs/ERASURE.md). Every event that an [Erasure] can change holds
// personal content of exactly one class, and each erasure erases whole
// classes of the earlier events of its stream: a store that seals each
// event's content under a key per (stream, class) and destroys the key of
// every class an erasure names leaves what [Erasure.Erase] would leave.
const (
	// ClassMessages: what was said in a transcript's messages (a clear
	// and a delete erase it).
	ClassMessages = "messages"
	// ClassSession: a transcript's title, prompt, model config, state_meta
	// values and handoff errors (a delete erases them, a clear keeps them).
	ClassSession = "session"
	// ClassOrigin: a lane's origins and display names (every person
	// erasure of the lane).
	ClassOrigin = "origin"
	// ClassQueue: a lane's queued texts (a person erasure of a lane keyed
	// on the person).
	ClassQueue = "queue"
	// ClassTopics: the user ids of a Telegram chat's topic events.
	ClassTopics = "topics"
	// classRequest prefixes the class of one erasure request's ids.
	classRequest = "request:"
)

// PersonalClass returns the class of the personal content e holds and e
// as the erasure of that class leaves it; class is "" when no erasure
// changes e (it holds nothing personal, or it is erased already). It is
// derived from the erasures' own Erase methods, so the two cannot drift.
func PersonalClass(e Event) (class string, erased Event) {
	if r, ok := e.(ErasureRequested); ok {
		if out, changed := (ErasureCompleted{ErasureID: r.ErasureID}).Erase(e); changed {
			return classRequest + r.ErasureID, out
		}
		return "", e
	}
	for _, c := range []struct {
		class string
		x     Erasure
	}{
		{ClassMessages, TranscriptErased{Scope: EraseMessages}},
		{ClassSession, TranscriptErased{Scope: EraseTranscript}},
		{ClassOrigin, LaneErased{}},
		{ClassQueue, LaneErased{QueueTexts: true}},
		{ClassTopics, TopicsErased{}},
	} {
		if out, changed := c.x.Erase(e); changed {
			return c.class, out
		}
	}
	return "", e
}

// ErasedClasses returns the classes of personal content that x erases in
// the earlier events of its stream.
func ErasedClasses(x Erasure) []string {
	switch x := x.(type) {
	case TranscriptErased:
		if x.Scope == EraseMessages {
			return []string{ClassMessages}
		}
		return []string{ClassMessages, ClassSession}
	case LaneErased:
		if x.QueueTexts {
			return []string{ClassOrigin, ClassQueue}
		}
		return []string{ClassOrigin}
	case TopicsErased:
		return []string{ClassTopics}
	case ErasureCompleted:
		return []string{classRequest + x.ErasureID}
	}
	return nil
}
