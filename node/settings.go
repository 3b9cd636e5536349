package node

import (
	"os"
	"slices"
	"strings"

	"hermes/adapters/config"
	"hermes/commands"
	"hermes/domain"
)

// WriteSideConfig is the part of c the write side needs: the reset policies
// (default, per platform, per chat type), the key options, the time zone
// and the resume freshness. c is expected to have passed Validate.
// WhatsApp aliases are left empty: commands fills them from its
// AliasSource.
func WriteSideConfig(c config.Config) commands.Config {
	out := commands.DefaultConfig()
	out.Keys.GroupSessionsPerUser = c.GroupSessionsPerUser
	out.Keys.ThreadSessionsPerUser = c.ThreadSessionsPerUser
	out.Keys.MultiplexProfiles = c.MultiplexProfiles
	out.Keys.Profile = c.Profile
	out.Policies = domain.ResetPolicies{
		Default:    domainPolicy(c.SessionReset),
		ByPlatform: domainPolicies(c.Platforms),
		ByType:     domainPolicies(c.ResetByType),
	}
	out.Location = c.Location()
	out.ResumeFreshness = c.Agent.GatewayAutoContinueFreshness
	out.Queue = commands.QueueSettings{
		BusyInputMode: c.Gateway.BusyInputMode,
		MaxItems:      c.Gateway.QueueMaxItems,
		TTL:           c.Gateway.QueueTTL,
	}
	return out
}

func domainPolicy(p config.ResetPolicy) domain.ResetPolicy {
	return domain.ResetPolicy{
		Mode:                   domain.ResetMode(p.Mode),
		AtHour:                 p.AtHour,
		IdleMinutes:            p.IdleMinutes,
		Notify:                 p.Notify,
		NotifyExcludePlatforms: append([]string(nil), p.NotifyExcludePlatforms...),
	}
}

func domainPolicies(ps map[string]config.ResetPolicy) map[string]domain.ResetPolicy {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]domain.ResetPolicy, len(ps))
	for name, p := range ps {
		out[name] = domainPolicy(p)
	}
	return out
}

// contextSettings is what the session context prompt needs from the
// configuration: connected platforms and their home channels, the home as
// the agent sees it, and the redaction switch.
func contextSettings(c config.Config, h Home) domain.ContextSettings {
	out := domain.ContextSettings{
		HomeChannels:     map[string]domain.HomeChannel{},
		HermesHome:       displayHome(h.Dir),
		RedactPII:        c.Privacy.RedactPII,
		PIISafePlatforms: c.Privacy.PIISafePlatforms,
	}
	for name, p := range c.PlatformSettings {
		if !p.Enabled {
			continue
		}
		out.ConnectedPlatforms = append(out.ConnectedPlatforms, name)
		if p.HomeChannel != nil {
			out.HomeChannels[name] = domain.HomeChannel{ChatID: p.HomeChannel.ChatID, Name: p.HomeChannel.Name}
		}
	}
	slices.Sort(out.ConnectedPlatforms)
	return out
}

// displayHome abbreviates the user's home directory to "~", as Hermes shows
// its home to the agent.
func displayHome(dir string) string {
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		if rel, ok := strings.CutPrefix(dir, home); ok && (rel == "" || strings.HasPrefix(rel, "/")) {
			return "~" + rel
		}
	}
	return dir
}
