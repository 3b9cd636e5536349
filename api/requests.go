package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"hermes/commands"
	"hermes/domain"
	"hermes/events"
)

// The request bodies of the API. They are the API's own types, mapped
// explicitly to commands and events: a field added here never changes the
// schema of the log by accident (that takes a new event version, its
// upcaster and its golden file). TestNoStoredTypeDecoded refuses a body
// decoded into a type of events or domain.
//
// Each type checks its fields in validate, which decode calls: that is the
// place for the checks at the door (presence, bounds, enumerations).

// request is a request body: decode validates it once decoded.
type request interface {
	validate() error
}

// decode reads a JSON body strictly into a T and validates it. The body is
// decoded by JSON v2 with unknown members refused (strictJSON), so refused
// with 400 and a message naming the problem and where it is: malformed JSON,
// text that is not valid UTF-8, a \u escape of half a UTF-16 surrogate pair,
// a name given twice in one object (free-form values such as a message's
// content included), a name that is not a field of T (names are exact:
// "Text" is not "text"), a value of the wrong type, and trailing data. An
// empty body decodes as {} when allowEmpty.
func decode[T request](r *http.Request, allowEmpty bool) (T, error) {
	var v T
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return v, fmt.Errorf("%w: the limit is %d bytes", errTooLarge, tooBig.Limit)
		}
		return v, fmt.Errorf("%w: read body: %v", errBadRequest, err)
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if !allowEmpty {
			return v, fmt.Errorf("%w: a JSON body is required", errBadRequest)
		}
		return v, v.validate()
	}
	if trimmed[0] != '{' {
		return v, fmt.Errorf("%w: the body must be a JSON object", errBadRequest)
	}
	if err := jsonv2.Unmarshal(body, &v, strictJSON); err != nil {
		return v, fmt.Errorf("%w: %s", errBadRequest, describeJSONError(body, err))
	}
	if err := v.validate(); err != nil {
		return v, err
	}
	return v, nil
}

// strictJSON are the options of decode: JSON v2's defaults refuse invalid
// UTF-8, lone surrogate escapes and duplicate names, and match names
// exactly; unknown members are refused too.
var strictJSON = jsonv2.RejectUnknownMembers(true)

// describeJSONError says what is wrong with body, which jsonv2.Unmarshal
// refused with err, and where: a field as a dotted path (source.chat_id,
// messages[2].role), else a byte offset. The message is valid UTF-8 (the
// library quotes the bytes it shows).
func describeJSONError(body []byte, err error) string {
	var syntaxErr *jsontext.SyntacticError
	var semErr *jsonv2.SemanticError
	var msg string
	switch {
	case errors.As(err, &syntaxErr):
		msg = describeSyntaxError(body, syntaxErr)
	case errors.As(err, &semErr):
		msg = describeSemanticError(semErr)
	default:
		msg = err.Error()
	}
	return strings.ToValidUTF8(msg, "\uFFFD")
}

func describeSyntaxError(body []byte, e *jsontext.SyntacticError) string {
	switch {
	case errors.Is(e.Err, jsontext.ErrDuplicateName):
		return fmt.Sprintf("the name %q is given twice in %s", e.JSONPointer.LastToken(), objectAt(e.JSONPointer.Parent()))
	case errors.Is(e.Err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of body"
	case endsAValue(body):
		// The first value is whole: what the decoder refused follows it.
		return fmt.Sprintf("trailing data after the JSON body at byte %d", e.ByteOffset)
	}
	what := strings.TrimPrefix(e.Err.Error(), "jsontext: ")
	if e.JSONPointer != "" {
		return fmt.Sprintf("malformed JSON in %s at byte %d: %s", fieldPath(e.JSONPointer), e.ByteOffset, what)
	}
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.ByteOffset, what)
}

// endsAValue reports whether body starts with one whole, valid JSON value.
func endsAValue(body []byte) bool {
	return jsontext.NewDecoder(bytes.NewReader(body)).SkipValue() == nil
}

func describeSemanticError(e *jsonv2.SemanticError) string {
	if errors.Is(e.Err, jsonv2.ErrUnknownName) {
		return fmt.Sprintf("unknown field %q in %s (names are exact and case-sensitive)", e.JSONPointer.LastToken(), objectAt(e.JSONPointer.Parent()))
	}
	want, wantKind := jsonKindOf(e.GoType)
	msg := fmt.Sprintf("field %q must be %s", fieldPath(e.JSONPointer), want)
	switch {
	case errors.Is(e.Err, strconv.ErrRange) && len(e.JSONValue) > 0:
		return msg + ", and " + truncateJSON(e.JSONValue) + " is out of its range"
	case len(e.JSONValue) > 0:
		msg += ", not " + truncateJSON(e.JSONValue)
	case e.JSONKind != 0 && e.JSONKind != wantKind:
		msg += ", not " + kindName(e.JSONKind)
	}
	if e.Err != nil && !errors.Is(e.Err, strconv.ErrSyntax) {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// fieldPath is a JSON pointer as a dotted path: /messages/2/role is
// messages[2].role. The request types have no maps, so a token of digits
// is an index.
func fieldPath(p jsontext.Pointer) string {
	var b strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.Atoi(tok); err == nil && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}

// objectAt names the object at p: the body, or a field.
func objectAt(p jsontext.Pointer) string {
	if p == "" {
		return "the body"
	}
	return strconv.Quote(fieldPath(p))
}

// jsonKindOf says what JSON a Go type of a request decodes from, and its
// kind (0 when it takes more than one).
func jsonKindOf(t reflect.Type) (string, jsontext.Kind) {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == nil:
		return "another JSON value", 0
	case t == reflect.TypeFor[time.Time]():
		return "an RFC 3339 time string", '"'
	}
	switch t.Kind() {
	case reflect.String:
		return "a string", '"'
	case reflect.Bool:
		return "true or false", 't'
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer", '0'
	case reflect.Float32, reflect.Float64:
		return "a number", '0'
	case reflect.Struct, reflect.Map:
		return "an object", '{'
	case reflect.Slice, reflect.Array:
		return "an array", '['
	}
	return "another JSON value", 0
}

// kindName names a JSON kind as jsontext.Kind gives it.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case '{':
		return "an object"
	case '[':
		return "an array"
	}
	return "this value"
}

// truncateJSON is a JSON number or string as it was sent, cut to fit a
// message.
func truncateJSON(v jsontext.Value) string {
	const max = 64
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}

// emptyRequest is a body with no fields (absent, or {}).
type emptyRequest struct{}

func (emptyRequest) validate() error { return nil }

// maxSourceField bounds every string of a source.
const maxSourceField = 1024

// sourceRequest is a message source (Hermes' SessionSource) as sent.
// chat_id is a required string that may be empty: a DM without one keys on
// the participant, a group on the participant too (see domain.BuildSessionKey).
type sourceRequest struct {
	Platform       string  `json:"platform"`
	ChatID         *string `json:"chat_id"`
	ChatName       string  `json:"chat_name"`
	ChatType       string  `json:"chat_type"`
	UserID         string  `json:"user_id"`
	UserName       string  `json:"user_name"`
	ThreadID       string  `json:"thread_id"`
	ChatTopic      string  `json:"chat_topic"`
	UserIDAlt      string  `json:"user_id_alt"`
	ChatIDAlt      string  `json:"chat_id_alt"`
	IsBot          bool    `json:"is_bot"`
	GuildID        string  `json:"guild_id"`
	ParentChatID   string  `json:"parent_chat_id"`
	MessageID      string  `json:"message_id"`
	RoleAuthorized bool    `json:"role_authorized"`
	// What Hermes sends since d7f5acb9: scope_id is the scope's name,
	// guild_id its alias (Hermes writes both, equal); the profile a
	// multiplexing gateway routed the message to; the auto-thread fields.
	ScopeID               string `json:"scope_id"`
	Profile               string `json:"profile"`
	AutoThreadCreated     bool   `json:"auto_thread_created"`
	AutoThreadInitialName string `json:"auto_thread_initial_name"`
	ProspectiveThreadID   string `json:"prospective_thread_id"`
}

func (s sourceRequest) validate() error {
	if s.Platform == "" {
		return fmt.Errorf("%w: source.platform is required", errBadRequest)
	}
	if s.ChatID == nil {
		return fmt.Errorf("%w: source.chat_id is required (it may be \"\")", errBadRequest)
	}
	switch s.ChatType {
	case "", domain.ChatDM, domain.ChatGroup, domain.ChatChannel, domain.ChatThread:
	default:
		return fmt.Errorf("%w: source.chat_type %q is not dm, group, channel or thread", errBadRequest, s.ChatType)
	}
	// The ids become parts of the session key; the names are shown. Both
	// are bounded, valid UTF-8 and free of NUL.
	for _, f := range [...]struct{ name, v string }{
		{"platform", s.Platform}, {"chat_id", *s.ChatID}, {"chat_name", s.ChatName}, {"user_id", s.UserID},
		{"user_name", s.UserName}, {"thread_id", s.ThreadID}, {"chat_topic", s.ChatTopic}, {"user_id_alt", s.UserIDAlt},
		{"chat_id_alt", s.ChatIDAlt}, {"guild_id", s.GuildID}, {"parent_chat_id", s.ParentChatID}, {"message_id", s.MessageID},
		{"scope_id", s.ScopeID}, {"profile", s.Profile}, {"auto_thread_initial_name", s.AutoThreadInitialName},
		{"prospective_thread_id", s.ProspectiveThreadID},
	} {
		if err := checkTextOf("source.", f.name, f.v, maxSourceField); err != nil {
			return err
		}
	}
	if s.ScopeID != "" && s.GuildID != "" && s.ScopeID != s.GuildID {
		return fmt.Errorf("%w: source.scope_id %q and its alias source.guild_id %q differ", errBadRequest, s.ScopeID, s.GuildID)
	}
	return nil
}

// scope is the source's scope: scope_id, else its alias guild_id.
func (s sourceRequest) scope() string {
	if s.ScopeID != "" {
		return s.ScopeID
	}
	return s.GuildID
}

// domainSource maps a validated source to the domain's.
func (s sourceRequest) domainSource() domain.SessionSource {
	return domain.SessionSource{
		Platform: s.Platform, ChatID: *s.ChatID, ChatName: s.ChatName, ChatType: s.ChatType,
		UserID: s.UserID, UserName: s.UserName, ThreadID: s.ThreadID, ChatTopic: s.ChatTopic,
		UserIDAlt: s.UserIDAlt, ChatIDAlt: s.ChatIDAlt, IsBot: s.IsBot, GuildID: s.scope(),
		ParentChatID: s.ParentChatID, MessageID: s.MessageID, RoleAuthorized: s.RoleAuthorized,
		Profile: s.Profile, AutoThreadCreated: s.AutoThreadCreated, AutoThreadInitialName: s.AutoThreadInitialName,
		ProspectiveThreadID: s.ProspectiveThreadID,
	}
}

// resolveRequest is POST /v1/sessions/resolve.
type resolveRequest struct {
	Source   *sourceRequest `json:"source"`
	ForceNew bool           `json:"force_new"`
}

func (q resolveRequest) validate() error {
	if q.Source == nil {
		return fmt.Errorf("%w: source is required", errBadRequest)
	}
	return q.Source.validate()
}

func (q resolveRequest) command(commandID string) commands.ResolveSession {
	return commands.ResolveSession{Source: q.Source.domainSource(), ForceNew: q.ForceNew, CommandID: commandID}
}

// touchRequest is POST /v1/sessions/{key}/touch.
type touchRequest struct {
	LastPromptTokens *int64 `json:"last_prompt_tokens"`
}

func (q touchRequest) validate() error {
	return checkCount("last_prompt_tokens", q.LastPromptTokens)
}

// checkCount refuses a token count (when given) outside 0 to
// domain.MaxTokens.
func checkCount(name string, v *int64) error {
	if v == nil {
		return nil
	}
	return domain.CheckTokens(name, 0, *v)
}

// checkCost refuses a cost (when given) that is not finite or outside 0 to
// domain.MaxCostUSD.
func checkCost(name string, v *float64) error {
	if v == nil {
		return nil
	}
	return domain.CheckCost(name, 0, *v)
}

// maxTurnField bounds turn_id and cost_status.
const maxTurnField = 200

// startTurnRequest is POST /v1/sessions/{key}/turns/start.
type startTurnRequest struct {
	TurnID string `json:"turn_id"`
	// GatewayRun names the gateway run the turn belongs to (optional).
	GatewayRun *gatewayRunRef `json:"gateway_run"`
}

func (q startTurnRequest) validate() error {
	if q.GatewayRun != nil {
		if err := q.GatewayRun.validate(); err != nil {
			return err
		}
	}
	return checkText("turn_id", q.TurnID, maxTurnField)
}

// completeTurnRequest is POST /v1/sessions/{key}/turns.
type completeTurnRequest struct {
	TurnID           string  `json:"turn_id"`
	InputTokens      int64   `json:"input_tokens"`
	OutputTokens     int64   `json:"output_tokens"`
	CacheReadTokens  int64   `json:"cache_read_tokens"`
	CacheWriteTokens int64   `json:"cache_write_tokens"`
	EstimatedCostUSD float64 `json:"estimated_cost_usd"`
	CostStatus       string  `json:"cost_status"`
	LastPromptTokens *int64  `json:"last_prompt_tokens"`
	Failed           bool    `json:"failed"`
}

// validate bounds each delta on its own; the lane checks the totals they
// add to (domain.Lane.CompleteTurn).
func (q completeTurnRequest) validate() error {
	if err := checkText("turn_id", q.TurnID, maxTurnField); err != nil {
		return err
	}
	if err := checkText("cost_status", q.CostStatus, maxTurnField); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"input_tokens", q.InputTokens}, {"output_tokens", q.OutputTokens},
		{"cache_read_tokens", q.CacheReadTokens}, {"cache_write_tokens", q.CacheWriteTokens},
	} {
		if err := checkCount(c.name, &c.v); err != nil {
			return err
		}
	}
	if err := checkCost("estimated_cost_usd", &q.EstimatedCostUSD); err != nil {
		return err
	}
	return checkCount("last_prompt_tokens", q.LastPromptTokens)
}

func (q completeTurnRequest) outcome() domain.TurnOutcome {
	return domain.TurnOutcome{
		TurnID: q.TurnID, InputTokens: q.InputTokens, OutputTokens: q.OutputTokens,
		CacheReadTokens: q.CacheReadTokens, CacheWriteTokens: q.CacheWriteTokens,
		EstimatedCostUSD: q.EstimatedCostUSD, CostStatus: q.CostStatus,
		LastPromptTokens: q.LastPromptTokens, Failed: q.Failed,
	}
}

// resetRequest is POST /v1/sessions/{key}/reset.
type resetRequest struct {
	DisplayName string `json:"display_name"`
}

func (q resetRequest) validate() error {
	return checkText("display_name", q.DisplayName, maxSourceField)
}

// switchRequest is POST /v1/sessions/{key}/switch.
type switchRequest struct {
	SessionID string `json:"session_id"`
}

func (q switchRequest) validate() error { return domain.ValidateSessionID(q.SessionID) }

// resumePendingRequest is POST /v1/sessions/{key}/resume-pending.
type resumePendingRequest struct {
	Reason *string `json:"reason"`
}

// validate keeps the reason free text as Hermes stores it (docs/API.md
// names the three restart reasons; only those are continued automatically),
// bounded as the domain bounds it; a reason given must say something (""
// is refused), one left out is restart_timeout.
func (q resumePendingRequest) validate() error {
	if q.Reason == nil {
		return nil
	}
	return domain.CheckResumeReason(*q.Reason)
}

// reason is the reason given, restart_timeout when none.
func (q resumePendingRequest) reason() string {
	if q.Reason == nil {
		return events.ResumeRestartTimeout
	}
	return *q.Reason
}

// activeProcessesRequest is PUT /v1/sessions/{key}/active-processes.
type activeProcessesRequest struct {
	Count *int `json:"count"`
}

// maxActiveProcesses bounds the count of live background processes.
const maxActiveProcesses = 1_000_000

func (q activeProcessesRequest) validate() error {
	switch {
	case q.Count == nil:
		return fmt.Errorf("%w: count is required", errBadRequest)
	case *q.Count < 0 || *q.Count > maxActiveProcesses:
		return fmt.Errorf("%w: count must be an integer from 0 to %d", errBadRequest, maxActiveProcesses)
	}
	return nil
}

// maxSweepAge bounds max_age_seconds of suspend-recently-active: ten years.
const maxSweepAge = 10 * 365 * 24 * 3600

// suspendRecentRequest is POST /v1/recovery/suspend-recently-active.
type suspendRecentRequest struct {
	MaxAgeSeconds *int64 `json:"max_age_seconds"`
}

func (q suspendRecentRequest) validate() error {
	if age := q.maxAgeSeconds(); age < 0 || age > maxSweepAge {
		return fmt.Errorf("%w: max_age_seconds must be between 0 and ten years", errBadRequest)
	}
	return nil
}

// maxAgeSeconds is the age given, 120 when none.
func (q suspendRecentRequest) maxAgeSeconds() int64 {
	if q.MaxAgeSeconds == nil {
		return 120
	}
	return *q.MaxAgeSeconds
}

// maxRetentionDays bounds the day counts of the prunes: 100 years.
const maxRetentionDays = 36500

// pruneEntriesRequest is POST /v1/maintenance/prune-entries. As in Hermes'
// prune_old_entries, max_age_days <= 0 disables pruning (nothing is pruned).
type pruneEntriesRequest struct {
	MaxAgeDays *int `json:"max_age_days"`
}

func (q pruneEntriesRequest) validate() error {
	if q.MaxAgeDays == nil || *q.MaxAgeDays > maxRetentionDays {
		return fmt.Errorf("%w: max_age_days must be an integer of at most %d (<= 0 disables pruning)", errBadRequest, maxRetentionDays)
	}
	return nil
}

// disabled reports whether the request asks for no pruning at all.
func (q pruneEntriesRequest) disabled() bool { return *q.MaxAgeDays <= 0 }

// ackNoticeRequest is POST /v1/sessions/{key}/notice/ack.
type ackNoticeRequest struct {
	SessionID string `json:"session_id"`
}

func (q ackNoticeRequest) validate() error {
	if q.SessionID != "" {
		return domain.ValidateSessionID(q.SessionID)
	}
	return nil
}

// enqueueRequest is POST /v1/sessions/{key}/queue.
type enqueueRequest struct {
	Text    string          `json:"text"`
	Kind    string          `json:"kind"`
	Message json.RawMessage `json:"message"`
}

// message is the client's message object, nil when absent or null.
func (q enqueueRequest) message() json.RawMessage {
	if string(q.Message) == "null" {
		return nil
	}
	return q.Message
}

func (q enqueueRequest) validate() error {
	msg := q.message()
	switch {
	case q.Kind == "":
		return fmt.Errorf("%w: kind is required (followup or queue)", errBadRequest)
	case q.Kind != events.QueueKindFollowup && q.Kind != events.QueueKindQueue:
		return fmt.Errorf("%w: kind %q is not followup or queue", errBadRequest, q.Kind)
	case len(q.Text) > domain.MaxQueueTextBytes:
		return fmt.Errorf("%w: text is %d bytes, the limit is %d", errTooLarge, len(q.Text), domain.MaxQueueTextBytes)
	case len(msg) > domain.MaxQueueMessageBytes:
		return fmt.Errorf("%w: message is %d bytes, the limit is %d", errTooLarge, len(msg), domain.MaxQueueMessageBytes)
	case len(msg) > 0 && msg[0] != '{':
		return fmt.Errorf("%w: message must be a JSON object", errBadRequest)
	case q.Text == "" && len(msg) == 0:
		return fmt.Errorf("%w: text or message is required", errBadRequest)
	}
	return nil
}

func (q enqueueRequest) command(key sessionKey, commandID string) commands.EnqueueMessage {
	return commands.EnqueueMessage{Key: string(key), Kind: q.Kind, Text: q.Text, Message: q.message(), CommandID: commandID}
}

// messageRequest is a transcript message as sent (POST …/messages, and
// each message of PUT …/messages). The commands validate role (a closed
// set) too. Content and reasoning are free text, bounded by the body.
type messageRequest struct {
	Role                string          `json:"role"`
	Content             json.RawMessage `json:"content"`
	ToolCallID          string          `json:"tool_call_id"`
	ToolCalls           json.RawMessage `json:"tool_calls"`
	ToolName            string          `json:"tool_name"`
	TokenCount          *int64          `json:"token_count"`
	FinishReason        string          `json:"finish_reason"`
	Reasoning           *string         `json:"reasoning"`
	ReasoningContent    *string         `json:"reasoning_content"`
	ReasoningDetails    json.RawMessage `json:"reasoning_details"`
	CodexReasoningItems json.RawMessage `json:"codex_reasoning_items"`
	CodexMessageItems   json.RawMessage `json:"codex_message_items"`
}

// maxMessageField bounds tool_call_id, tool_name and finish_reason.
const maxMessageField = 1024

func (m messageRequest) validate() error {
	for _, f := range [...]struct{ name, v string }{
		{"tool_call_id", m.ToolCallID}, {"tool_name", m.ToolName}, {"finish_reason", m.FinishReason},
	} {
		if err := checkText(f.name, f.v, maxMessageField); err != nil {
			return err
		}
	}
	return checkCount("token_count", m.TokenCount)
}

// event maps the message to the stored message (events.Message v1).
func (m messageRequest) event() events.Message {
	return events.Message{
		Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, ToolCalls: m.ToolCalls,
		ToolName: m.ToolName, TokenCount: m.TokenCount, FinishReason: m.FinishReason,
		Reasoning: m.Reasoning, ReasoningContent: m.ReasoningContent, ReasoningDetails: m.ReasoningDetails,
		CodexReasoningItems: m.CodexReasoningItems, CodexMessageItems: m.CodexMessageItems,
	}
}

// appendMessageRequest is POST /v1/transcripts/{session_id}/messages: a
// message and, optionally, the turn it belongs to (the write is fenced by
// that turn).
type appendMessageRequest struct {
	messageRequest
	TurnID string `json:"turn_id"`
}

func (m appendMessageRequest) validate() error {
	if err := checkText("turn_id", m.TurnID, maxTurnField); err != nil {
		return err
	}
	return m.messageRequest.validate()
}

// rewriteRequest is PUT /v1/transcripts/{session_id}/messages.
type rewriteRequest struct {
	Messages *[]messageRequest `json:"messages"`
}

func (q rewriteRequest) validate() error {
	if q.Messages == nil {
		return fmt.Errorf("%w: messages is required", errBadRequest)
	}
	for i, m := range *q.Messages {
		if err := m.validate(); err != nil {
			return fmt.Errorf("message %d: %w", i, err)
		}
	}
	return nil
}

func (q rewriteRequest) events() []events.Message {
	out := make([]events.Message, len(*q.Messages))
	for i, m := range *q.Messages {
		out[i] = m.event()
	}
	return out
}

// maxRewind bounds n of a rewind.
const maxRewind = 10000

// rewindRequest is POST /v1/transcripts/{session_id}/rewind.
type rewindRequest struct {
	N *int `json:"n"`
}

func (q rewindRequest) validate() error {
	if n := q.n(); n < 1 || n > maxRewind {
		return fmt.Errorf("%w: n must be an integer from 1 to %d", errBadRequest, maxRewind)
	}
	return nil
}

// n is the number of turns to rewind, 1 when not given.
func (q rewindRequest) n() int {
	if q.N == nil {
		return 1
	}
	return *q.N
}

// titleRequest is PUT /v1/transcripts/{session_id}/title.
type titleRequest struct {
	Title *string `json:"title"`
}

// maxTitleBytes bounds a title as sent (and as queried), before
// transcripts.SanitizeTitle bounds it to MaxTitleLength characters.
const maxTitleBytes = 1024

func (q titleRequest) validate() error {
	if q.Title == nil {
		return fmt.Errorf("%w: title is required (\"\" clears it)", errBadRequest)
	}
	return checkTitle("title", *q.Title)
}

// checkTitle bounds a title as sent and refuses invalid UTF-8; a NUL byte,
// like every control character, is stripped by transcripts.SanitizeTitle
// (Hermes' sanitize_title), not refused.
func checkTitle(field, v string) error {
	switch {
	case len(v) > maxTitleBytes:
		return fmt.Errorf("%w: %s is longer than %d bytes", errBadRequest, field, maxTitleBytes)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s is not valid UTF-8", errBadRequest, field)
	}
	return nil
}

// metadataRequest is PATCH /v1/transcripts/{session_id}.
type metadataRequest struct {
	Model            *string  `json:"model"`
	ModelConfig      *string  `json:"model_config"`
	SystemPrompt     *string  `json:"system_prompt"`
	ParentSessionID  *string  `json:"parent_session_id"`
	BillingProvider  *string  `json:"billing_provider"`
	BillingBaseURL   *string  `json:"billing_base_url"`
	BillingMode      *string  `json:"billing_mode"`
	InputTokens      int64    `json:"input_tokens"`
	OutputTokens     int64    `json:"output_tokens"`
	CacheReadTokens  int64    `json:"cache_read_tokens"`
	CacheWriteTokens int64    `json:"cache_write_tokens"`
	ReasoningTokens  int64    `json:"reasoning_tokens"`
	EstimatedCostUSD *float64 `json:"estimated_cost_usd"`
	ActualCostUSD    *float64 `json:"actual_cost_usd"`
	CostStatus       *string  `json:"cost_status"`
	CostSource       *string  `json:"cost_source"`
	PricingVersion   *string  `json:"pricing_version"`
	APICallCount     int64    `json:"api_call_count"`
}

// maxMetadataField bounds the names of a model, a billing route and a
// pricing (model_config and system_prompt are bounded by the body).
const maxMetadataField = 1024

// validate bounds each count and cost on its own; the transcript commands
// check the totals they add to (commands.TranscriptCommands.UpdateMetadata).
func (q metadataRequest) validate() error {
	for _, f := range []struct {
		name string
		v    *string
	}{
		{"model", q.Model}, {"billing_provider", q.BillingProvider}, {"billing_base_url", q.BillingBaseURL},
		{"billing_mode", q.BillingMode}, {"cost_status", q.CostStatus}, {"cost_source", q.CostSource},
		{"pricing_version", q.PricingVersion},
	} {
		if f.v == nil {
			continue
		}
		if err := checkText(f.name, *f.v, maxMetadataField); err != nil {
			return err
		}
	}
	if q.ParentSessionID != nil && *q.ParentSessionID != "" {
		if err := domain.ValidateSessionID(*q.ParentSessionID); err != nil {
			return fmt.Errorf("parent_session_id: %w", err)
		}
	}
	for _, c := range []struct {
		name string
		v    int64
	}{
		{"input_tokens", q.InputTokens}, {"output_tokens", q.OutputTokens}, {"cache_read_tokens", q.CacheReadTokens},
		{"cache_write_tokens", q.CacheWriteTokens}, {"reasoning_tokens", q.ReasoningTokens}, {"api_call_count", q.APICallCount},
	} {
		if err := checkCount(c.name, &c.v); err != nil {
			return err
		}
	}
	if err := checkCost("estimated_cost_usd", q.EstimatedCostUSD); err != nil {
		return err
	}
	return checkCost("actual_cost_usd", q.ActualCostUSD)
}

func (q metadataRequest) command(id sessionID, commandID string) commands.UpdateMetadata {
	return commands.UpdateMetadata{Update: events.SessionMetadataUpdated{
		SessionID: string(id), Model: q.Model, ModelConfig: q.ModelConfig, SystemPrompt: q.SystemPrompt,
		ParentSessionID: q.ParentSessionID, BillingProvider: q.BillingProvider, BillingBaseURL: q.BillingBaseURL,
		BillingMode: q.BillingMode, InputTokens: q.InputTokens, OutputTokens: q.OutputTokens,
		CacheReadTokens: q.CacheReadTokens, CacheWriteTokens: q.CacheWriteTokens, ReasoningTokens: q.ReasoningTokens,
		EstimatedCostUSD: q.EstimatedCostUSD, ActualCostUSD: q.ActualCostUSD, CostStatus: q.CostStatus,
		CostSource: q.CostSource, PricingVersion: q.PricingVersion, APICallCount: q.APICallCount,
	}, CommandID: commandID}
}

// endRequest is POST /v1/transcripts/{session_id}/end. The reason is free
// text, as Hermes stores it.
type endRequest struct {
	Reason string `json:"reason"`
}

// maxEndReason bounds an end reason (as the command does).
const maxEndReason = 64

func (q endRequest) validate() error {
	if q.Reason == "" {
		return fmt.Errorf("%w: reason is required", errBadRequest)
	}
	return checkText("reason", q.Reason, maxEndReason)
}

// pruneSessionsRequest is POST /v1/maintenance/prune-sessions.
type pruneSessionsRequest struct {
	OlderThanDays *int   `json:"older_than_days"`
	Source        string `json:"source"`
}

func (q pruneSessionsRequest) validate() error {
	if q.OlderThanDays == nil || *q.OlderThanDays < 0 || *q.OlderThanDays > maxRetentionDays {
		return fmt.Errorf("%w: older_than_days must be an integer from 0 to %d", errBadRequest, maxRetentionDays)
	}
	return checkText("source", q.Source, maxSourceField)
}

// erasureRequest is POST /v1/erasure: forget a person.
type erasureRequest struct {
	Platform    string `json:"platform"`
	UserID      string `json:"user_id"`
	UserIDAlt   string `json:"user_id_alt"`
	Reason      string `json:"reason"`
	RequestedBy string `json:"requested_by"`
}

func (q erasureRequest) validate() error {
	if q.Platform == "" {
		return fmt.Errorf("%w: platform is required", errBadRequest)
	}
	if q.UserID == "" && q.UserIDAlt == "" {
		return fmt.Errorf("%w: user_id or user_id_alt is required", errBadRequest)
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"platform", q.Platform, maxSourceField}, {"user_id", q.UserID, maxSourceField},
		{"user_id_alt", q.UserIDAlt, maxSourceField}, {"reason", q.Reason, maxEndReason},
		{"requested_by", q.RequestedBy, maxSourceField},
	} {
		if err := checkText(f.name, f.v, f.max); err != nil {
			return err
		}
	}
	return nil
}

func (q erasureRequest) command(commandID string) commands.Forget {
	return commands.Forget{Platform: q.Platform, UserID: q.UserID, UserIDAlt: q.UserIDAlt,
		Reason: q.Reason, RequestedBy: q.RequestedBy, CommandID: commandID}
}

// clockRequest is POST /v1/clock: an instant or a forward step.
type clockRequest struct {
	Now     *time.Time `json:"now"`
	Advance string     `json:"advance"`
}

func (q clockRequest) validate() error {
	switch {
	case q.Now != nil && q.Advance != "":
		return fmt.Errorf("%w: give now or advance, not both", errBadRequest)
	case q.Now == nil && q.Advance == "":
		return fmt.Errorf("%w: give now or advance", errBadRequest)
	case q.Advance != "":
		if _, err := q.advance(); err != nil {
			return err
		}
	}
	return nil
}

// maxClockStep bounds an advance of the test clock: a hundred years.
const maxClockStep = 100 * 365 * 24 * time.Hour

func (q clockRequest) advance() (time.Duration, error) {
	d, err := time.ParseDuration(q.Advance)
	if err != nil || d < 0 || d > maxClockStep {
		return 0, fmt.Errorf("%w: advance must be a non-negative Go duration of at most 100 years, such as \"25h\" or \"90s\"", errBadRequest)
	}
	return d, nil
}

// checkText refuses a string that is not valid UTF-8, has a NUL byte or is
// longer than max bytes; field names it in the refusal.
func checkText(field, v string, max int) error { return checkTextOf("", field, v, max) }

// checkTextOf is checkText of the field named prefix+field: the name is
// only put together for a refusal.
func checkTextOf(prefix, field, v string, max int) error {
	switch {
	case len(v) > max:
		return fmt.Errorf("%w: %s%s is longer than %d bytes", errBadRequest, prefix, field, max)
	case !utf8.ValidString(v):
		return fmt.Errorf("%w: %s%s is not valid UTF-8", errBadRequest, prefix, field)
	case strings.IndexByte(v, 0) >= 0:
		return fmt.Errorf("%w: %s%s contains a NUL byte", errBadRequest, prefix, field)
	}
	return nil
}
