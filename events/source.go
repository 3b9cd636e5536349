package events

// Source is the stored shape of a message origin (Hermes' SessionSource), with
// the seed's field names. The domain defines SessionSource on the same
// underlying struct, so conversion between the two is free and exact.
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
}
