package config

import (
	"fmt"
	"maps"
	"net"
	"slices"
)

// minTokenLength is the fewest non-space characters of an api.token
// (checkToken): shorter ones can be guessed.
const minTokenLength = 16

// Validate reports every value out of range and every broken cross-field
// rule of c, as *Error values (Path and Reason set, no Source) joined with
// errors.Join; nil when c is usable. Load has already called it on what it
// returns. The cross-field rules: api.addr must be host:port, a host other
// than loopback (127.0.0.0/8, ::1, localhost) needs api.token, and a token
// must have at least 16 non-space characters and no white space at either
// end (a blank one would turn auth off while looking set), and
// api.max_followers must stay below api.max_connections (event streams
// hold their connection, so the other clients always keep room).
func (c Config) Validate() error {
	return joinErrors(c.validate())
}

func (c Config) validate() []*Error {
	var errs []*Error
	for _, k := range keys {
		if r := k.checkValue(current(k.ptr(&c))); r != "" {
			errs = append(errs, &Error{Path: k.path, Reason: r})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Platforms)) {
		errs = append(errs, validatePolicy(c.Platforms[name], "platforms."+name+".session_reset")...)
	}
	for _, name := range slices.Sorted(maps.Keys(c.ResetByType)) {
		errs = append(errs, validatePolicy(c.ResetByType[name], "reset_by_type."+name)...)
	}
	if host, _, err := net.SplitHostPort(c.API.Addr); err == nil && !isLoopbackHost(host) && c.API.Token == "" {
		errs = append(errs, &Error{Path: "api.addr",
			Reason: fmt.Sprintf("%q: binding a non-loopback address requires api.token", c.API.Addr)})
	}
	if c.API.MaxFollowers >= c.API.MaxConnections {
		errs = append(errs, &Error{Path: "api.max_followers",
			Reason: fmt.Sprintf("%d: must be below api.max_connections (%d), so clients other than event streams keep room", c.API.MaxFollowers, c.API.MaxConnections)})
	}
	return errs
}

func validatePolicy(p ResetPolicy, prefix string) []*Error {
	var errs []*Error
	for _, pk := range policyKeys {
		k := pk.key(prefix + "." + pk.name)
		if r := k.checkValue(current(pk.ptr(&p))); r != "" {
			errs = append(errs, &Error{Path: k.path, Reason: r})
		}
	}
	return errs
}
