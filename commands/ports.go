package commands

import "context"

// AliasSource reports the WhatsApp bridge's identifier alias graph (the
// lid-mapping files). Implemented by adapters/whatsapp.
type AliasSource interface {
	WhatsAppAliases() (map[string][]string, error)
}

// LaneDirectory lists the session key of every lane that has a stream, for
// the commands that sweep all lanes (crash recovery, pruning, expiry). A read
// model implements it; it may lag behind the log, which is harmless because
// each lane is re-read and re-decided before anything is appended.
type LaneDirectory interface {
	SessionKeys(ctx context.Context) ([]string, error)
}
