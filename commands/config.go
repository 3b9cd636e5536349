package commands

import (
	"time"

	"hermes/domain"
)

// Config is the part of hermes' configuration the write side needs.
type Config struct {
	// Keys shapes session keys (group/thread isolation, profiles). Its
	// WhatsAppAliases are replaced by what the AliasSource reports.
	Keys domain.KeyOptions
	// Policies are the reset policies (default, per platform, per type).
	Policies domain.ResetPolicies
	// Location is the time zone of daily boundaries and session ids.
	Location *time.Location
	// ResumeFreshness is agent.gateway_auto_continue_freshness.
	ResumeFreshness time.Duration
	// Queue configures the per-lane message queue (zero fields: Hermes'
	// defaults).
	Queue QueueSettings
}

// DefaultConfig is Hermes' defaults, in UTC.
func DefaultConfig() Config {
	return Config{
		Keys:            domain.DefaultKeyOptions(),
		Policies:        domain.ResetPolicies{Default: domain.DefaultResetPolicy()},
		Location:        time.UTC,
		ResumeFreshness: time.Hour,
		Queue:           QueueSettings{BusyInputMode: "interrupt", MaxItems: 32, TTL: 24 * time.Hour},
	}
}

// rulesFor resolves the lane rules for a platform and chat type.
func (c Config) rulesFor(platform, chatType string) domain.LaneRules {
	return domain.LaneRules{
		Policy:          c.Policies.For(platform, chatType),
		Location:        c.Location,
		ResumeFreshness: c.ResumeFreshness,
	}
}
