package hermeshome

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

const maxConfigBytes = 1 << 20

// ConfigYAML is the home's config.yaml.
func (h Home) ConfigYAML() string { return filepath.Join(h.Dir, "config.yaml") }

// ResetPolicy is the session_reset policy a Hermes home's gateway applies.
type ResetPolicy struct {
	Mode        string
	AtHour      int
	IdleMinutes int
	// Source says where it comes from: "config.yaml session_reset",
	// "config.yaml gateway.session_reset", or Hermes' default.
	Source string
	// Overrides are the per-platform and per-chat-type policies the file
	// sets (platforms.<name>.session_reset, reset_by_type.<type>), by key.
	Overrides []string
}

func (p ResetPolicy) String() string {
	switch p.Mode {
	case "idle":
		return fmt.Sprintf("idle after %d minutes", p.IdleMinutes)
	case "daily":
		return fmt.Sprintf("daily at %02d:00", p.AtHour)
	case "both":
		return fmt.Sprintf("both (daily at %02d:00, idle after %d minutes)", p.AtHour, p.IdleMinutes)
	}
	return p.Mode
}

// NoTimeResetsSchema is the first state.db schema of Hermes releases whose
// default reset policy is "none" (July 2026: b9aa9289 writes v25 and
// defaults to none; the spec's era, v11–v17, defaulted to "both").
const NoTimeResetsSchema = 25

// ReadResetPolicy reads the default reset policy of the home's
// config.yaml as Hermes' load_gateway_config does (top-level
// session_reset, else gateway.session_reset, each missing field Hermes'
// default), with the defaults of the Hermes that wrote a state.db of
// schema (0 when unknown: the spec's era). A missing file is the default;
// an unreadable one is reported and read as the default.
func (h Home) ReadResetPolicy(schema int, rep *Report) ResetPolicy {
	p := ResetPolicy{Mode: "both", AtHour: 4, IdleMinutes: 1440, Source: "Hermes' default of the spec's era"}
	if schema >= NoTimeResetsSchema {
		p.Mode, p.Source = "none", "Hermes' default since July 2026"
	}
	data, err := readBounded(h.ConfigYAML(), maxConfigBytes)
	if errors.Is(err, os.ErrNotExist) {
		return p
	}
	if err != nil {
		rep.Add(Info, "config.yaml", "unreadable (%v): Hermes' default reset policy assumed", err)
		return p
	}
	var doc map[string]any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		rep.Add(Info, "config.yaml", "not YAML (%v): Hermes' default reset policy assumed", err)
		return p
	}
	block, src := doc["session_reset"], "config.yaml session_reset"
	if _, ok := doc["session_reset"]; !ok {
		if gw, ok := doc["gateway"].(map[string]any); ok {
			block, src = gw["session_reset"], "config.yaml gateway.session_reset"
		}
	}
	if m, ok := block.(map[string]any); ok && len(m) > 0 {
		p.Source = src
		if v, ok := m["mode"].(string); ok {
			p.Mode = strings.ToLower(v)
		} else if v, ok := m["mode"].(bool); ok && !v {
			p.Mode = "none" // YAML 1.1's `mode: off`
		}
		if v, ok := m["at_hour"].(int); ok {
			p.AtHour = v
		}
		if v, ok := m["idle_minutes"].(int); ok {
			p.IdleMinutes = v
		}
	}
	if plats, ok := doc["platforms"].(map[string]any); ok {
		for name, v := range plats {
			if m, ok := v.(map[string]any); ok && m["session_reset"] != nil {
				p.Overrides = append(p.Overrides, "platforms."+name+".session_reset")
			}
		}
	}
	if types, ok := doc["reset_by_type"].(map[string]any); ok {
		for name := range types {
			p.Overrides = append(p.Overrides, "reset_by_type."+name)
		}
	}
	sort.Strings(p.Overrides)
	return p
}
