package api_test

import (
	"fmt"
	"net/url"
	"strconv"
)

// The read routes of a gateway process's state, each checked right after a
// write by TestEveryReadRouteReadsYourWrites.
func init() {
	readCases["/v1/gateway-runs"] = func(h *harness, n int) readCheck {
		run := fmt.Sprint("read-", n)
		h.call("POST", "/v1/gateway-runs", map[string]any{"gateway": "reads", "run_id": run}, 201, nil)
		return readCheck{path: "/v1/gateway-runs?gateway=reads", status: 200, has: `"run_id":"` + run + `"`}
	}
	readCases["/v1/sessions/{key}/expiry"] = func(h *harness, n int) readCheck {
		res := h.resolve(dm(fmt.Sprint("expiry-", n)))
		h.call("POST", lane(res.Entry.SessionKey, "/reset"), map[string]string{}, 200, nil)
		var e entry
		h.call("POST", lane(res.Entry.SessionKey, "/reset"), map[string]string{}, 200, &e)
		return readCheck{path: lane(res.Entry.SessionKey, "/expiry"), status: 200, has: `"session_id":"` + e.SessionID + `"`}
	}
	readCases["/v1/meta/{meta_key}"] = func(h *harness, n int) readCheck {
		v := fmt.Sprint("value-", n)
		h.call("PUT", "/v1/meta/reads", map[string]string{"value": v}, 200, nil)
		return readCheck{path: "/v1/meta/reads", status: 200, has: `"value":"` + v + `"`}
	}
	readCases["/v1/handoffs"] = func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("handoffs-", n))).Entry.SessionID
		h.call("POST", transcript(id, "/handoff"), map[string]string{"platform": "discord"}, 200, nil)
		return readCheck{path: "/v1/handoffs?state=pending", status: 200, has: `"` + id + `"`}
	}
	readCases["/v1/transcripts/{session_id}/handoff"] = func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("handoff-", n))).Entry.SessionID
		h.call("POST", transcript(id, "/handoff"), map[string]string{"platform": "slack"}, 200, nil)
		return readCheck{path: transcript(id, "/handoff"), status: 200, has: `"state":"pending"`}
	}
	readCases["/v1/transcripts/{session_id}/messages/around"] = func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("around-", n))).Entry.SessionID
		mid := h.appendMessage(id, "user", fmt.Sprint("around ", n))
		return readCheck{path: transcript(id, "/messages/around?message_id="+strconv.FormatInt(mid, 10)), status: 200, has: `"messages_before":0`}
	}
	readCases["/v1/transcripts/{session_id}/messages/anchored"] = func(h *harness, n int) readCheck {
		id := h.resolve(dm(fmt.Sprint("anchored-", n))).Entry.SessionID
		mid := h.appendMessage(id, "user", fmt.Sprint("anchored ", n))
		return readCheck{path: transcript(id, "/messages/anchored?message_id="+strconv.FormatInt(mid, 10)), status: 200,
			has: fmt.Sprintf(`"id":%d,`, mid)}
	}
	// The topic routes: a bound topic, then the chat's topic mode disabled
	// with its bindings (an answer that does not wait for the read model).
	topics := func(h *harness, n int) (chat, id string) {
		res := h.resolve(dm(fmt.Sprint("topics-", n)))
		chat = fmt.Sprint("chat-", n)
		h.call("PUT", "/v1/telegram/chats/"+chat+"/topic-mode", map[string]string{"user_id": "u"}, 200, nil)
		h.call("PUT", "/v1/telegram/chats/"+chat+"/topics/1", map[string]string{"user_id": "u", "session_key": res.Entry.SessionKey,
			"session_id": res.Entry.SessionID}, 200, nil)
		h.call("DELETE", "/v1/telegram/chats/"+chat+"/topic-mode", nil, 200, nil)
		return chat, res.Entry.SessionID
	}
	readCases["/v1/telegram/chats/{chat_id}/topic-mode"] = func(h *harness, n int) readCheck {
		chat, _ := topics(h, n)
		return readCheck{path: "/v1/telegram/chats/" + chat + "/topic-mode", status: 200, has: `"enabled":false`}
	}
	readCases["/v1/telegram/chats/{chat_id}/topics"] = func(h *harness, n int) readCheck {
		chat, _ := topics(h, n)
		return readCheck{path: "/v1/telegram/chats/" + chat + "/topics", status: 200, has: `"bindings":[]`}
	}
	readCases["/v1/telegram/chats/{chat_id}/topics/{thread_id}"] = func(h *harness, n int) readCheck {
		chat, _ := topics(h, n)
		return readCheck{path: "/v1/telegram/chats/" + chat + "/topics/1", status: 200, has: `"binding":null`}
	}
	readCases["/v1/telegram/topic-bindings"] = func(h *harness, n int) readCheck {
		_, id := topics(h, n)
		return readCheck{path: "/v1/telegram/topic-bindings?session_id=" + url.QueryEscape(id), status: 200, has: `"binding":null`}
	}
	readCases["/v1/telegram/unlinked-sessions"] = func(h *harness, n int) readCheck {
		res := h.resolve(dm(fmt.Sprint("unlinked-", n)))
		return readCheck{path: "/v1/telegram/unlinked-sessions?user_id=" + url.QueryEscape(res.Entry.Origin.UserID), status: 200,
			has: `"` + res.Entry.SessionID + `"`}
	}
}
