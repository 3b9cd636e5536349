package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// LoadOptions say where Load reads from. Nothing is read from the process
// itself: the caller passes os.Environ() and the flags it parsed.
type LoadOptions struct {
	// Home is HERMES_HOME; "" means Home(Environ, "").
	Home string
	// ConfigPath is the config file; "" means <Home>/config.yaml. A missing
	// file is not an error: the defaults apply.
	ConfigPath string
	// Environ is the environment as os.Environ returns it ("NAME=value").
	// An empty value counts as unset, as in Python Hermes, and so does a
	// blank one, except for api.token: a blank token is refused.
	Environ []string
	// Flags are the flags the user set, keyed by config path ("api.addr"),
	// with their values as typed. Only set flags belong here: every entry
	// overrides the file and the environment, an empty value included.
	Flags map[string]string
	// FlagNames optionally names the flag of a config path as the user
	// typed it ("api.addr" → "--addr"), for error messages; the default is
	// "--" + path.
	FlagNames map[string]string
}

// Home resolves HERMES_HOME as Python Hermes does: the --home flag, else
// the HERMES_HOME variable of environ (trimmed; empty counts as unset),
// else ~/.hermes, where ~ is environ's HOME or the user's home directory.
func Home(environ []string, flag string) string {
	if flag != "" {
		return flag
	}
	env := environMap(environ)
	if h := strings.TrimSpace(env["HERMES_HOME"]); h != "" {
		return h
	}
	home := env["HOME"]
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	return filepath.Join(home, ".hermes")
}

// Load returns the configuration: the defaults, overridden by the config
// file, then by the environment (HERMES_<PATH> for every scalar key, then
// Hermes' older aliases), then by opts.Flags; and validates the result.
//
// Configuration problems are all collected and returned as *Error values
// joined with errors.Join, each naming its source (file and line,
// variable or flag), key path and reason; a file that cannot be read for
// another reason than not existing is a plain wrapped error. On error the
// returned Config is the zero value.
//
// Reading config.yaml follows PyYAML and Hermes' SessionResetPolicy.from_dict:
// booleans may be written yes/no/on/off/y/n in any case; integers may be
// quoted; an explicit null means the default; keys hermes does not know are
// ignored; a later duplicate key wins; anchors, aliases and << merges work.
// A session_reset block under platforms.<name> or reset_by_type.<type>
// starts from DefaultResetPolicy, not from the top-level session_reset, so
// its missing and null keys take Hermes' defaults; a null block is no
// override at all. gateway.session_reset is read only when the top-level
// session_reset is missing or null.
func Load(opts LoadOptions) (Config, error) {
	path := opts.ConfigPath
	if path == "" {
		home := opts.Home
		if home == "" {
			home = Home(opts.Environ, "")
		}
		path = filepath.Join(home, "config.yaml")
	}
	cfg := Default()
	l := &loader{cfg: &cfg, origins: map[string]origin{}}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return Config{}, fmt.Errorf("read config: %w", err)
	default:
		l.file(path, data)
	}
	l.env(opts.Environ)
	l.flags(opts.Flags, opts.FlagNames)
	// Values that failed above kept their lower-layer value, so this finds
	// only the cross-field problems of what did load.
	for _, e := range cfg.validate() {
		o := l.origins[e.Path]
		e.Source, e.Line = o.source, o.line
		l.errs = append(l.errs, e)
	}
	if len(l.errs) > 0 {
		return Config{}, joinErrors(l.errs)
	}
	return cfg, nil
}

// origin is where the effective value of a key came from.
type origin struct {
	source string
	line   int
}

type loader struct {
	cfg     *Config
	origins map[string]origin
	errs    []*Error
	// path is the config file being read.
	path string
}

func (l *loader) fail(source string, line int, path, reason string) {
	l.errs = append(l.errs, &Error{Source: source, Line: line, Path: path, Reason: reason})
}

// yamlLine finds the line in yaml.v3's syntax errors ("yaml: line 3: …").
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (l *loader) file(path string, data []byte) {
	l.path = path
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if !errors.Is(err, io.EOF) {
			l.syntaxError(err)
		}
		return
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		l.syntaxError(err)
		return
	default:
		l.fail(path, next.Line, "", "holds more than one YAML document")
		return
	}
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		l.top(doc.Content[0])
	}
}

func (l *loader) syntaxError(err error) {
	msg := err.Error()
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		l.fail(l.path, line, "", "not valid YAML: "+m[2])
		return
	}
	l.fail(l.path, 0, "", "not valid YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

func (l *loader) top(n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, "", "the document is "+describe(n)+", not a mapping of keys")
		return
	}
	sawReset := false
	var gateway *yaml.Node
	for _, p := range pairs(n) {
		name := p.key.Value
		switch name {
		case "session_reset":
			if !isNull(deref(p.value)) {
				sawReset = true
				l.walk(p.value, name, name)
			}
		case "gateway":
			gateway = p.value
		case "platforms":
			l.platforms(p.value)
		case "reset_by_type":
			l.resetByType(p.value)
		case "hooks":
			l.hooks(p.value)
		default:
			l.walk(p.value, name, name)
		}
	}
	if gateway == nil {
		return
	}
	g := deref(gateway)
	if isNull(g) {
		return
	}
	if g.Kind != yaml.MappingNode {
		l.fail(l.path, g.Line, "gateway", "want a mapping, got "+describe(g))
		return
	}
	for _, p := range pairs(g) {
		if p.key.Value != "session_reset" {
			l.walk(p.value, "gateway."+p.key.Value, "gateway."+p.key.Value)
			continue
		}
		if !sawReset {
			l.walk(p.value, "gateway.session_reset", "session_reset")
		}
	}
}

// walk applies the value n written at the display path disp to the keys
// under the canonical path canon (they differ for gateway.session_reset).
// Paths that are neither a key nor a section holding keys are ignored.
func (l *loader) walk(n *yaml.Node, disp, canon string) {
	if k, ok := keyByPath(canon); ok {
		l.setNode(k, k.ptr(l.cfg), n, disp)
		return
	}
	if !isSection(canon) {
		return
	}
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, disp, "want a mapping, got "+describe(n))
		return
	}
	for _, p := range pairs(n) {
		l.walk(p.value, disp+"."+p.key.Value, canon+"."+p.key.Value)
	}
}

func isSection(path string) bool {
	return slices.ContainsFunc(keys, func(k key) bool { return strings.HasPrefix(k.path, path+".") })
}

func (l *loader) platforms(n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, "platforms", "want a mapping of platform names, got "+describe(n))
		return
	}
	for _, p := range pairs(n) {
		name := p.key.Value
		v := deref(p.value)
		if isNull(v) {
			continue
		}
		if v.Kind != yaml.MappingNode {
			l.fail(l.path, v.Line, "platforms."+name, "want a mapping, got "+describe(v))
			continue
		}
		l.platformSettings(name, v)
		for _, q := range pairs(v) {
			if q.key.Value != "session_reset" {
				continue
			}
			if pol, ok := l.policy(q.value, "platforms."+name+".session_reset"); ok {
				if l.cfg.Platforms == nil {
					l.cfg.Platforms = map[string]ResetPolicy{}
				}
				l.cfg.Platforms[name] = pol
			} else {
				delete(l.cfg.Platforms, name)
			}
		}
	}
}

// platformSettings reads enabled and home_channel of platforms.<name>.
func (l *loader) platformSettings(name string, v *yaml.Node) {
	disp := "platforms." + name
	ps := l.cfg.PlatformSettings[name]
	for _, q := range pairs(v) {
		switch q.key.Value {
		case "enabled":
			l.setNode(key{path: disp + ".enabled", kind: kindBool}, &ps.Enabled, q.value, disp+".enabled")
		case "home_channel":
			hc := deref(q.value)
			if isNull(hc) {
				continue
			}
			if hc.Kind != yaml.MappingNode {
				l.fail(l.path, hc.Line, disp+".home_channel", "want a mapping with chat_id and name, got "+describe(hc))
				continue
			}
			home := HomeChannel{}
			for _, f := range pairs(hc) {
				switch f.key.Value {
				case "chat_id":
					l.setNode(key{path: disp + ".home_channel.chat_id", kind: kindString}, &home.ChatID, f.value, disp+".home_channel.chat_id")
				case "name":
					l.setNode(key{path: disp + ".home_channel.name", kind: kindString}, &home.Name, f.value, disp+".home_channel.name")
				}
			}
			if home.ChatID == "" {
				l.fail(l.path, hc.Line, disp+".home_channel.chat_id", "is required")
				continue
			}
			ps.HomeChannel = &home
		}
	}
	if l.cfg.PlatformSettings == nil {
		l.cfg.PlatformSettings = map[string]Platform{}
	}
	l.cfg.PlatformSettings[name] = ps
}

// hooks reads the hooks block: its scalar keys and the webhooks list.
func (l *loader) hooks(n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, "hooks", "want a mapping, got "+describe(n))
		return
	}
	for _, p := range pairs(n) {
		if p.key.Value != "webhooks" {
			l.walk(p.value, "hooks."+p.key.Value, "hooks."+p.key.Value)
			continue
		}
		list := deref(p.value)
		if isNull(list) {
			continue
		}
		if list.Kind != yaml.SequenceNode {
			l.fail(l.path, list.Line, "hooks.webhooks", "want a list of webhooks, got "+describe(list))
			continue
		}
		l.cfg.Hooks.Webhooks = nil
		for i, item := range list.Content {
			disp := fmt.Sprintf("hooks.webhooks[%d]", i)
			item = deref(item)
			if item.Kind != yaml.MappingNode {
				l.fail(l.path, item.Line, disp, "want a mapping, got "+describe(item))
				continue
			}
			w := Webhook{Backoff: time.Second, MaxBackoff: time.Minute, Timeout: 10 * time.Second}
			for _, f := range pairs(item) {
				field := disp + "." + f.key.Value
				switch f.key.Value {
				case "name":
					l.setNode(key{path: field, kind: kindString}, &w.Name, f.value, field)
				case "url":
					l.setNode(key{path: field, kind: kindString, check: checkWebhookURL}, &w.URL, f.value, field)
				case "event_types":
					l.setNode(key{path: field, kind: kindList}, &w.EventTypes, f.value, field)
				case "secret":
					l.setNode(key{path: field, kind: kindString, secret: true}, &w.Secret, f.value, field)
				case "max_retries":
					l.setNode(key{path: field, kind: kindInt, lo: -1, hi: 100}, &w.MaxRetries, f.value, field)
				case "backoff_seconds":
					l.setNode(key{path: field, kind: kindSeconds, lo: 0, hi: 3600}, &w.Backoff, f.value, field)
				case "max_backoff_seconds":
					l.setNode(key{path: field, kind: kindSeconds, lo: 0, hi: 86400}, &w.MaxBackoff, f.value, field)
				case "timeout_seconds":
					l.setNode(key{path: field, kind: kindSeconds, lo: 0.001, hi: 600}, &w.Timeout, f.value, field)
				default:
					l.fail(l.path, f.key.Line, field, "is not a webhook setting (name, url, event_types, secret, max_retries, backoff_seconds, max_backoff_seconds, timeout_seconds)")
				}
			}
			switch {
			case w.Name == "":
				l.fail(l.path, item.Line, disp+".name", "is required")
			case w.URL == "":
				l.fail(l.path, item.Line, disp+".url", "is required")
			case slices.ContainsFunc(l.cfg.Hooks.Webhooks, func(o Webhook) bool { return o.Name == w.Name }):
				l.fail(l.path, item.Line, disp+".name", fmt.Sprintf("%q is used by another webhook", w.Name))
			default:
				l.cfg.Hooks.Webhooks = append(l.cfg.Hooks.Webhooks, w)
			}
		}
	}
}

func checkWebhookURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "must be an http or https URL"
	}
	return ""
}

func (l *loader) resetByType(n *yaml.Node) {
	n = deref(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, "reset_by_type", "want a mapping of chat types, got "+describe(n))
		return
	}
	for _, p := range pairs(n) {
		name := p.key.Value
		if pol, ok := l.policy(p.value, "reset_by_type."+name); ok {
			if l.cfg.ResetByType == nil {
				l.cfg.ResetByType = map[string]ResetPolicy{}
			}
			l.cfg.ResetByType[name] = pol
		} else {
			delete(l.cfg.ResetByType, name)
		}
	}
}

// policy reads a per-platform or per-type block: Hermes' from_dict, so
// it starts from the defaults. A null (or bad) block is no policy.
func (l *loader) policy(n *yaml.Node, disp string) (ResetPolicy, bool) {
	n = deref(n)
	if isNull(n) {
		return ResetPolicy{}, false
	}
	if n.Kind != yaml.MappingNode {
		l.fail(l.path, n.Line, disp, "want a mapping, got "+describe(n))
		return ResetPolicy{}, false
	}
	pol := DefaultResetPolicy()
	for _, p := range pairs(n) {
		for _, pk := range policyKeys {
			if pk.name == p.key.Value {
				l.setNode(pk.key(disp+"."+pk.name), pk.ptr(&pol), p.value, disp+"."+pk.name)
			}
		}
	}
	return pol, true
}

// setNode parses a file value into the field ptr of key k. A null leaves the
// default; a bad value is reported and leaves the field as it was.
func (l *loader) setNode(k key, ptr any, n *yaml.Node, disp string) {
	n = deref(n)
	v, null, reason := k.fromNode(n)
	if reason != "" {
		l.fail(l.path, n.Line, disp, reason)
		return
	}
	if null {
		return
	}
	store(ptr, v)
	l.origins[k.path] = origin{source: l.path, line: n.Line}
}

func (l *loader) env(environ []string) {
	env := environMap(environ)
	for _, k := range keys {
		for _, name := range k.envNames() {
			s, ok := env[name]
			// A blank secret is not unset: HERMES_API_TOKEN=" " must not
			// quietly turn auth off, so checkToken refuses it.
			if !ok || s == "" || (!k.secret && strings.TrimSpace(s) == "") {
				continue
			}
			l.setString(k, s, name)
			break
		}
	}
}

func (l *loader) flags(flags, names map[string]string) {
	for _, path := range slices.Sorted(maps.Keys(flags)) {
		source := names[path]
		if source == "" {
			source = "--" + path
		}
		k, ok := keyByPath(path)
		if !ok {
			l.fail(source, 0, path, "is not a configuration key that flags can set")
			continue
		}
		l.setString(k, flags[path], source)
	}
}

func (l *loader) setString(k key, s, source string) {
	v, reason := k.fromString(s)
	if reason != "" {
		l.fail(source, 0, k.path, reason)
		return
	}
	store(k.ptr(l.cfg), v)
	l.origins[k.path] = origin{source: source}
}

// fromNode parses a file value: null reports null; otherwise the value in
// the form store takes, or a reason.
func (k key) fromNode(n *yaml.Node) (v any, null bool, reason string) {
	if isNull(n) {
		return nil, true, ""
	}
	if k.kind == kindList {
		if n.Kind != yaml.SequenceNode {
			return nil, false, "want a list, got " + describe(n)
		}
		out := []string{}
		for _, item := range n.Content {
			item = deref(item)
			if item.Kind != yaml.ScalarNode || isNull(item) {
				return nil, false, "want a list of names, found " + describe(item)
			}
			out = append(out, item.Value)
		}
		return out, false, ""
	}
	if n.Kind != yaml.ScalarNode {
		return nil, false, "want " + article(k.kind) + ", got " + describe(n)
	}
	tag, text := n.ShortTag(), n.Value
	switch k.kind {
	case kindBool:
		b, ok := parseBool(text)
		if !ok {
			return nil, false, notBool(text)
		}
		return b, false, ""
	case kindInt:
		var i int64
		switch tag {
		case "!!int":
			if err := n.Decode(&i); err != nil {
				return nil, false, fmt.Sprintf("%s is out of range", text)
			}
		case "!!str":
			var err error
			if i, err = strconv.ParseInt(strings.TrimSpace(text), 10, 64); err != nil {
				return nil, false, fmt.Sprintf("%q is not an integer", text)
			}
		default:
			return nil, false, fmt.Sprintf("%s is not an integer", text)
		}
		return i, false, k.checkValue(i)
	case kindSeconds:
		var d time.Duration
		switch tag {
		case "!!int", "!!float":
			var f float64
			if err := n.Decode(&f); err != nil {
				return nil, false, fmt.Sprintf("%s is not a number of seconds", text)
			}
			var r string
			if d, r = secondsValue(text, f); r != "" {
				return nil, false, r
			}
		case "!!str":
			var r string
			if d, r = parseSeconds(text); r != "" {
				return nil, false, r
			}
		default:
			return nil, false, fmt.Sprintf("%s is not a number of seconds", text)
		}
		return d, false, k.checkValue(d)
	case kindMode:
		m := normalizeMode(text)
		return m, false, k.checkValue(m)
	}
	return text, false, k.checkValue(text)
}

func article(k kind) string {
	switch k {
	case kindBool:
		return "a boolean"
	case kindInt:
		return "an integer"
	case kindSeconds:
		return "a number of seconds"
	}
	return "a string"
}

// pair is one key and value of a mapping.
type pair struct{ key, value *yaml.Node }

// pairs are the entries of mapping n as PyYAML sees them: << merges
// resolved (explicit keys win over merged ones, earlier merged maps over
// later), and a repeated key taking the place of the earlier one.
func pairs(n *yaml.Node) []pair {
	var merged, own []pair
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge" {
			m := deref(v)
			var maps []*yaml.Node
			switch m.Kind {
			case yaml.MappingNode:
				maps = []*yaml.Node{m}
			case yaml.SequenceNode:
				for _, c := range slices.Backward(m.Content) {
					if c = deref(c); c.Kind == yaml.MappingNode {
						maps = append(maps, c)
					}
				}
			}
			for _, mm := range maps {
				merged = append(merged, pairs(mm)...)
			}
			continue
		}
		own = append(own, pair{k, v})
	}
	all := append(merged, own...)
	var out []pair
	for _, p := range all {
		out = slices.DeleteFunc(out, func(q pair) bool { return q.key.Value == p.key.Value })
		out = append(out, p)
	}
	return out
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// describe names what a node is, for "want X, got Y".
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return strconv.Quote(n.Value)
	}
	return "nothing"
}

func environMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if name, value, ok := strings.Cut(kv, "="); ok {
			m[name] = value
		}
	}
	return m
}

func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	es := make([]error, len(errs))
	for i, e := range errs {
		es[i] = e
	}
	return errors.Join(es...)
}
