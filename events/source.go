package events

// Source is the stored shape of a message origin (Hermes' SessionSource), with
// the seed's field names. The domain defines SessionSource on the same
// underlying struct, so conversion between the two is free and exact.
//
// GuildID is the scope of the source (a Discord guild, a Slack workspace, a
// Matrix server): newer Hermes calls it scope_id and keeps guild_id as its
// alias, always equal, so one stored field holds both. Profile and the
// auto-thread fields came with Hermes at d7f5acb9; they are omitted when
// empty, so events written before them keep their exact bytes.
type Source struct {
	Platform       string `json:"platform"`
	ChatID         string `json:"chat_id"`
	ChatName       string `json:"chat_name,omitempty"`
	ChatType       string `json:"chat_type"`
	UserID         string `json:"user_id,omitempty"`
	UserName       string `json:"user_name,omitempty"`
	ThreadID       string `json:"thread_id,omitempty"`
	ChatTopic      string `json:"chat_topic,omitempty"`
	UserIDAlt      string `json:"user_id_alt,omitempty"`
	ChatIDAlt      string `json:"chat_id_alt,omitempty"`
	IsBot          bool   `json:"is_bot"`
	GuildID        string `json:"guild_id,omitempty"`
	ParentChatID   string `json:"parent_chat_id,omitempty"`
	MessageID      string `json:"message_id,omitempty"`
	RoleAuthorized bool   `json:"role_authorized"`
	// Profile is the profile a multiplexing gateway routed the message to
	// (empty: the gateway's active profile).
	Profile string `json:"profile,omitempty"`
	// AutoThreadCreated: the thread was created by the gateway for this
	// conversation, with AutoThreadInitialName as its placeholder title.
	AutoThreadCreated     bool   `json:"auto_thread_created,omitempty"`
	AutoThreadInitialName string `json:"auto_thread_initial_name,omitempty"`
	// ProspectiveThreadID is the thread a channel message will be answered
	// in (Discord creates a thread with the message's id).
	ProspectiveThreadID string `json:"prospective_thread_id,omitempty"`
}
