package hermeshome

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"hermes/events"
	"hermes/projections/transcripts"
)

// Hermes' JSONL session export (`hermes sessions export FILE`, b9aa9289:
// SessionDB.export_all rendered by hermes_cli.session_export): one session
// per line, its sessions row (every column, the system prompt resolved from
// system_prompts, plus the computed last_active) with "messages", the list
// of its active message rows (content decoded from Hermes' "\x00json:"
// encoding, tool_calls parsed, every other column as stored).

// MaxJSONLLineBytes bounds one line (one session with its messages).
const MaxJSONLLineBytes = 256 << 20

// contentJSONPrefix marks content Hermes stored as JSON (a list of parts).
const contentJSONPrefix = "\x00json:"

// computedKeys are keys of an export line that are no column: Hermes
// computes them when it exports (last_active, preview) or adds them for a
// lineage export (segments, lineage_session_ids). They are not imported.
var computedKeys = map[string]bool{"messages": true, "last_active": true, "preview": true, "segments": true, "lineage_session_ids": true}

// sessionFields are the sessions columns of schema 11 an export line
// carries by name, in Hermes' column order (the order [WriteJSONL] writes).
var sessionFields = sessionColumns

// messageFields likewise for a message (session_id aside).
var messageFields = messageColumns

// JSONLSession is one line of a JSONL export, ready to import.
type JSONLSession struct {
	Line     int
	Session  events.SessionImported
	Messages []events.ImportedMessage
}

// ReadJSONL reads a JSONL export, calling fn for each session: in file
// order, except that a parent session included in the file comes before
// its children (the read model links a child only to a parent it has, as
// Hermes' import_sessions keeps a parent "included in the same import
// payload"). It reads the file twice, holding one line at a time: first
// the ids and parents with each line's place, then the lines in that
// order. A line that is not a session (not a JSON object, no id, an id a
// stream cannot carry, a message without a role) is skipped and reported;
// what an event cannot hold is cleaned and reported, as for a state.db. An
// error of fn, or a line longer than [MaxJSONLLineBytes], stops the
// reading.
func ReadJSONL(f io.ReaderAt, size int64, rep *Report, fn func(JSONLSession) error) error {
	type place struct {
		line       int
		off, n     int64
		id, parent string
	}
	var places []place
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	var off int64
	for line := 1; ; line++ {
		data, err := readLine(br)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", line, err)
		}
		if len(bytes.TrimSpace(data)) > 0 {
			var head struct {
				ID     any `json:"id"`
				Parent any `json:"parent_session_id"`
			}
			_ = json.Unmarshal(markNonFinite(data), &head)
			id, _ := head.ID.(string)
			parent, _ := head.Parent.(string)
			places = append(places, place{line: line, off: off, n: int64(len(data)), id: id, parent: parent})
		}
		off += int64(len(data))
		if errors.Is(err, io.EOF) {
			break
		}
	}
	byID := map[string]int{}
	for i, p := range places {
		if _, dup := byID[p.id]; !dup && p.id != "" {
			byID[p.id] = i
		}
	}
	done := make([]bool, len(places))
	order := make([]int, 0, len(places))
	var visit func(i, depth int)
	visit = func(i, depth int) {
		if done[i] {
			return
		}
		done[i] = true // first: a cycle ends here
		if j, ok := byID[places[i].parent]; ok && depth < 1000 {
			visit(j, depth+1)
		}
		order = append(order, i)
	}
	for i := range places {
		visit(i, 0)
	}
	seen := map[string]int{}
	for _, i := range order {
		p := places[i]
		data := make([]byte, p.n)
		if _, err := f.ReadAt(data, p.off); err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("line %d: %w", p.line, err)
		}
		s, ok := parseJSONLLine(p.line, data, rep)
		if !ok {
			continue
		}
		if first, dup := seen[s.Session.SessionID]; dup {
			rep.Add(Skipped, fmt.Sprintf("jsonl line %d", p.line), "session %s is on line %d already: not imported twice", printable(s.Session.SessionID), first)
			continue
		}
		seen[s.Session.SessionID] = p.line
		if err := fn(s); err != nil {
			return err
		}
	}
	return nil
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var out []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(out)+len(chunk) > MaxJSONLLineBytes {
			return nil, fmt.Errorf("%w: a line is longer than %d bytes", ErrUnsafeFile, MaxJSONLLineBytes)
		}
		out = append(out, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return out, err
	}
}

func parseJSONLLine(line int, data []byte, rep *Report) (JSONLSession, bool) {
	where := fmt.Sprintf("jsonl line %d", line)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(markNonFinite(data), &fields); err != nil {
		rep.Add(Skipped, where, "not a JSON object: %v", err)
		return JSONLSession{}, false
	}
	v := jsonValues{fields: fields, where: where, rep: rep}
	id, _ := v.text("id")
	if id == nil {
		rep.Add(Skipped, where, "no session id")
		return JSONLSession{}, false
	}
	v.where = "jsonl session " + printable(*id)
	if err := validSessionID(*id); err != nil {
		rep.Add(Skipped, v.where, "session id: %v", err)
		return JSONLSession{}, false
	}
	source, _ := v.text("source")
	e := events.SessionImported{
		SessionID:        *id,
		Source:           deref(source),
		UserID:           v.textOnly("user_id"),
		Model:            v.textOnly("model"),
		ModelConfig:      v.textOnly("model_config"),
		SystemPrompt:     v.textOnly("system_prompt"),
		ParentSessionID:  v.textOnly("parent_session_id"),
		EndReason:        v.textOnly("end_reason"),
		MessageCount:     v.counter("message_count"),
		ToolCallCount:    v.counter("tool_call_count"),
		InputTokens:      v.counter("input_tokens"),
		OutputTokens:     v.counter("output_tokens"),
		CacheReadTokens:  v.counter("cache_read_tokens"),
		CacheWriteTokens: v.counter("cache_write_tokens"),
		ReasoningTokens:  v.counter("reasoning_tokens"),
		BillingProvider:  v.textOnly("billing_provider"),
		BillingBaseURL:   v.textOnly("billing_base_url"),
		BillingMode:      v.textOnly("billing_mode"),
		EstimatedCostUSD: v.real("estimated_cost_usd"),
		ActualCostUSD:    v.real("actual_cost_usd"),
		CostStatus:       v.textOnly("cost_status"),
		CostSource:       v.textOnly("cost_source"),
		PricingVersion:   v.textOnly("pricing_version"),
		Title:            v.textOnly("title"),
		APICallCount:     v.counter("api_call_count"),
		HandoffState:     v.textOnly("handoff_state"),
		HandoffPlatform:  v.textOnly("handoff_platform"),
		HandoffError:     v.textOnly("handoff_error"),
		RewindCount:      v.counter("rewind_count"),
		Extra:            v.extra(sessionFields, computedKeys),
	}
	if started := v.real("started_at"); started != nil {
		e.StartedAt = *started
	} else {
		rep.Add(Clamped, v.where, "started_at is not a time: 0")
	}
	e.EndedAt = v.real("ended_at")
	e.At = events.EpochTime(e.StartedAt)
	out := JSONLSession{Line: line, Session: e}

	var msgs []json.RawMessage
	if raw, ok := fields["messages"]; ok && !isJSONNull(raw) {
		if err := json.Unmarshal(raw, &msgs); err != nil {
			rep.Add(Skipped, v.where, "messages is not a list: the session is imported without them")
			msgs = nil
		}
	}
	for i, raw := range msgs {
		m, ok := parseJSONLMessage(v.where, i, raw, *id, rep)
		if ok {
			out.Messages = append(out.Messages, m)
		}
	}
	// Messages are stored in id order, as Hermes reads them.
	sort.SliceStable(out.Messages, func(i, j int) bool { return out.Messages[i].ID < out.Messages[j].ID })
	return out, true
}

func parseJSONLMessage(sessionWhere string, i int, raw json.RawMessage, sessionID string, rep *Report) (events.ImportedMessage, bool) {
	where := fmt.Sprintf("%s message %d", sessionWhere, i)
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		rep.Add(Skipped, where, "not a JSON object")
		return events.ImportedMessage{}, false
	}
	v := jsonValues{fields: fields, where: where, rep: rep}
	id := v.integer("id")
	if id == nil || *id <= 0 {
		rep.Add(Skipped, where, "no message id")
		return events.ImportedMessage{}, false
	}
	v.where = "jsonl message " + strconv.FormatInt(*id, 10)
	if sid, _ := v.text("session_id"); sid != nil && *sid != sessionID {
		rep.Add(Info, v.where, "session_id %q differs from its line's session: imported into %s", printable(*sid), sessionID)
	}
	role := v.textOnly("role")
	if role == nil || *role == "" {
		rep.Add(Skipped, v.where, "no role")
		return events.ImportedMessage{}, false
	}
	m := events.ImportedMessage{
		ID:                  *id,
		Role:                *role,
		Content:             v.content("content"),
		ToolCallID:          v.textOnly("tool_call_id"),
		ToolCalls:           v.jsonText("tool_calls"),
		ToolName:            v.textOnly("tool_name"),
		TokenCount:          v.integer("token_count"),
		FinishReason:        v.textOnly("finish_reason"),
		Reasoning:           v.textOnly("reasoning"),
		ReasoningContent:    v.textOnly("reasoning_content"),
		ReasoningDetails:    v.jsonText("reasoning_details"),
		CodexReasoningItems: v.jsonText("codex_reasoning_items"),
		CodexMessageItems:   v.jsonText("codex_message_items"),
		Active:              true,
		Extra:               v.extra(messageFields, nil),
	}
	if ts := v.real("timestamp"); ts != nil {
		m.Timestamp = *ts
	} else {
		rep.Add(Clamped, v.where, "timestamp is not a time: 0")
	}
	if a, ok := fields["active"]; ok {
		var b bool
		var n float64
		if json.Unmarshal(a, &b) == nil {
			m.Active = b
		} else if json.Unmarshal(a, &n) == nil {
			m.Active = n != 0
		}
	}
	return m, true
}

// jsonValues reads one object's values by key, cleaning and reporting.
type jsonValues struct {
	fields map[string]json.RawMessage
	where  string
	rep    *Report
}

// text is a string value (a number is taken as its text); nil for null
// and absent; false when it is something else.
func (v jsonValues) text(name string) (*string, bool) {
	raw, ok := v.fields[name]
	if !ok || isJSONNull(raw) {
		return nil, true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if strings.HasPrefix(s, nonFinite) {
			return nil, false
		}
		if !utf8.Valid(raw) {
			v.rep.Add(Clamped, v.where, "%s is not valid UTF-8: invalid bytes replaced with U+FFFD", name)
			s = cleanString(s)
		}
		return &s, true
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err == nil {
		s := n.String()
		return &s, true
	}
	return nil, false
}

// textOnly is text, reporting a value that is not text (read as NULL).
func (v jsonValues) textOnly(name string) *string {
	s, ok := v.text(name)
	if !ok {
		v.rep.Add(Clamped, v.where, "%s is not text: NULL", name)
	}
	return s
}

// jsonText is a JSON column as its text: a string as it is, any other
// value as its compact JSON (Hermes decodes tool_calls on export).
func (v jsonValues) jsonText(name string) *string {
	if s, ok := v.text(name); ok {
		return s
	}
	s := string(keepJSON(v.fields[name]))
	return &s
}

// content is a message's content: text as it is, any other value (a list
// of parts) in Hermes' "\x00json:" encoding.
func (v jsonValues) content(name string) *string {
	raw, ok := v.fields[name]
	if !ok || isJSONNull(raw) {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil && !strings.HasPrefix(s, nonFinite) {
		s = cleanString(s)
		return &s
	}
	s = contentJSONPrefix + string(keepJSON(raw))
	return &s
}

func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return []byte("null")
	}
	return b.Bytes()
}

func (v jsonValues) number(name string) (float64, bool) {
	raw, ok := v.fields[name]
	if !ok || isJSONNull(raw) {
		return 0, false
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		v.rep.Add(Clamped, v.where, "%s is not a finite number: NULL", name)
		return 0, false
	}
	return f, true
}

func (v jsonValues) real(name string) *float64 {
	f, ok := v.number(name)
	if !ok {
		return nil
	}
	return &f
}

func (v jsonValues) integer(name string) *int64 {
	f, ok := v.number(name)
	if !ok {
		return nil
	}
	if math.Abs(f) > maxCount {
		v.rep.Add(Clamped, v.where, "%s %v is out of range: NULL", name, f)
		return nil
	}
	n := int64(f)
	return &n
}

func (v jsonValues) counter(name string) int64 {
	p := v.integer(name)
	switch {
	case p == nil:
		return 0
	case *p < 0:
		v.rep.Add(Clamped, v.where, "%s %d is negative: 0", name, *p)
		return 0
	}
	return *p
}

// extra is every key beyond known and skip, as its (cleaned) JSON value.
func (v jsonValues) extra(known []string, skip map[string]bool) map[string]json.RawMessage {
	var out map[string]json.RawMessage
	for name, raw := range v.fields {
		if skip[name] || contains(known, name) {
			continue
		}
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[cleanString(name)] = keepJSON(raw)
	}
	return out
}

// keepJSON is a value as it was written (compacted, its keys in their
// order), or cleaned (re-encoded) when it holds invalid UTF-8 or a NaN or
// Infinity an event cannot carry.
func keepJSON(raw json.RawMessage) json.RawMessage {
	if utf8.Valid(raw) && !bytes.Contains(raw, []byte(`\u0000non-finite:`)) {
		return compactJSON(raw)
	}
	return compactJSON(cleanJSON(raw))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// WriteJSONL writes sessions as Hermes' JSONL export: one line each, the
// schema-11 columns in Hermes' order, then the row's columns of a newer
// schema (its extra, by name), then "messages" with each message's columns
// and extra likewise. Hermes' `hermes sessions import`-style readers and
// [ReadJSONL] read it back.
func WriteJSONL(w io.Writer, sessions []transcripts.SessionExport) error {
	bw := bufio.NewWriter(w)
	for _, s := range sessions {
		line, err := jsonlLine(s)
		if err != nil {
			return fmt.Errorf("export session %s: %w", s.ID, err)
		}
		bw.Write(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

func jsonlLine(s transcripts.SessionExport) ([]byte, error) {
	var b bytes.Buffer
	obj := orderedObject{b: &b}
	obj.open()
	row, err := fieldsOf(s.Session)
	if err != nil {
		return nil, err
	}
	for _, name := range sessionFields {
		obj.add(name, row[name])
	}
	if err := obj.addExtra(s.Session.Extra, sessionFields); err != nil {
		return nil, err
	}
	if s.LastActive != nil {
		v, _ := json.Marshal(*s.LastActive)
		obj.add("last_active", v)
	}
	obj.key("messages")
	b.WriteByte('[')
	for i, m := range s.Messages {
		if i > 0 {
			b.WriteString(", ")
		}
		mrow, err := fieldsOf(m)
		if err != nil {
			return nil, err
		}
		mobj := orderedObject{b: &b}
		mobj.open()
		for _, name := range messageFields {
			v := mrow[name]
			if name == "active" {
				// Hermes' column is an INTEGER (0 or 1).
				v = json.RawMessage("0")
				if m.Active {
					v = json.RawMessage("1")
				}
			}
			mobj.add(name, v)
		}
		if err := mobj.addExtra(m.Extra, messageFields); err != nil {
			return nil, err
		}
		mobj.close()
	}
	b.WriteByte(']')
	obj.close()
	return b.Bytes(), nil
}

// fieldsOf is a struct's JSON as key → raw value.
func fieldsOf(v any) (map[string]json.RawMessage, error) {
	data, err := marshalNoEscape(v)
	if err != nil {
		return nil, err
	}
	var out map[string]json.RawMessage
	return out, json.Unmarshal(data, &out)
}

func marshalNoEscape(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// orderedObject writes a JSON object key by key, as Python's json.dumps
// lays one out (", " and ": ").
type orderedObject struct {
	b *bytes.Buffer
	n int
}

func (o *orderedObject) open()  { o.b.WriteByte('{') }
func (o *orderedObject) close() { o.b.WriteByte('}') }

func (o *orderedObject) key(k string) {
	if o.n > 0 {
		o.b.WriteString(", ")
	}
	o.n++
	kb, _ := marshalNoEscape(k)
	o.b.Write(kb)
	o.b.WriteString(": ")
}

func (o *orderedObject) add(k string, v json.RawMessage) {
	o.key(k)
	if v == nil {
		o.b.WriteString("null")
		return
	}
	o.b.Write(v)
}

func (o *orderedObject) addExtra(extra json.RawMessage, known []string) error {
	if len(extra) == 0 {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(extra, &m); err != nil {
		return fmt.Errorf("extra columns: %w", err)
	}
	names := make([]string, 0, len(m))
	for k := range m {
		if !contains(known, k) && !computedKeys[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	for _, k := range names {
		o.add(k, m[k])
	}
	return nil
}
