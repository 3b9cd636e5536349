package api

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"
)

// BrowserPolicy is what hermes accepts from web browsers. A page open on the
// gateway's machine can make the browser send requests to loopback; these
// rules keep such a page (and a DNS-rebinding one) from driving or reading
// hermes.
type BrowserPolicy struct {
	// Addr is the listen address (api.addr). Its host, unless it is empty
	// or unspecified (0.0.0.0, ::), is an allowed Host.
	Addr string
	// AllowedHosts are further host names or IP addresses (api.allowed_hosts)
	// the Host header may carry, with any port. Loopback names (localhost,
	// 127.0.0.0/8, ::1) are always allowed.
	AllowedHosts []string
	// AllowedOrigins are web origins, "scheme://host[:port]"
	// (api.allowed_origins), whose pages may call hermes cross-origin.
	AllowedOrigins []string
}

// browserGuard applies the BrowserPolicy to every request, before routing,
// auth and body limits:
//
//  1. Host must be a loopback name, the listen host or an allowed host
//     (403 forbidden): a DNS-rebinding page reaches hermes under the
//     attacker's host name, never under these. An HTTP/1.0 request without
//     Host passes: browsers always send one.
//  2. A cross-origin browser request is refused (403 forbidden), whatever
//     its method, unless its Origin is allowed. net/http's
//     CrossOriginProtection decides (Sec-Fetch-Site, else Origin against
//     Host); it exempts GET, HEAD and OPTIONS, which hermes does not: a
//     cross-site GET cannot read the answer, but its status still leaks
//     (a <script> tag's onload/onerror tells 200 from 404), and a refused
//     OPTIONS preflight carries no CORS headers.
//  3. A non-empty body must be application/json, parameters allowed (415
//     unsupported_media_type): the bodies a page can send without a CORS
//     preflight (text/plain, form encodings) are never read.
//
// A refused request reaches no handler, so it changes nothing.
func (s *Server) browserGuard() func(http.Handler) http.Handler {
	p := s.Browser
	hosts := map[string]bool{}
	if h, _, err := net.SplitHostPort(p.Addr); err == nil {
		if ip := net.ParseIP(h); h != "" && (ip == nil || !ip.IsUnspecified()) {
			hosts[normalizeHost(h)] = true
		}
	}
	for _, h := range p.AllowedHosts {
		hosts[normalizeHost(h)] = true
	}
	cop := http.NewCrossOriginProtection()
	for _, o := range p.AllowedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			// Config validates the list; an origin that still fails is
			// simply not trusted.
			s.log.Warn("allowed origin ignored", "origin", o, "err", err)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !hostAllowed(r.Host, hosts) {
				s.writeError(w, r, fmt.Errorf("%w: Host %q is not a loopback name, the listen address or in api.allowed_hosts", errForbidden, r.Host))
				return
			}
			if err := cop.Check(unsafeMethod(r)); err != nil {
				s.writeError(w, r, fmt.Errorf("%w: a cross-origin request (Origin %q, Sec-Fetch-Site %q); allow its origin with api.allowed_origins",
					errForbidden, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")))
				return
			}
			if r.ContentLength != 0 { // > 0, or -1: chunked
				ct := r.Header.Get("Content-Type")
				if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
					s.writeError(w, r, fmt.Errorf("%w: a request body must be application/json, not %q", errUnsupportedMediaType, ct))
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// unsafeMethod is r as CrossOriginProtection checks a POST: it exempts the
// safe methods, hermes checks every request the same way.
func unsafeMethod(r *http.Request) *http.Request {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		r = r.WithContext(r.Context()) // a shallow copy
		r.Method = http.MethodPost
	}
	return r
}

// hostAllowed reports whether the Host header hostport names loopback or
// one of hosts, with any port.
func hostAllowed(hostport string, hosts map[string]bool) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	switch host {
	case "127.0.0.1", "::1":
		return true // what local clients send, without parsing it as an IP
	}
	host = normalizeHost(host)
	if host == "" || host == "localhost" {
		// No Host at all is an HTTP/1.0 client (net/http refuses an
		// HTTP/1.1 request without one): never a browser.
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return hosts[host]
}

// normalizeHost lower-cases a host and strips an IPv6 literal's brackets.
func normalizeHost(h string) string {
	return strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
}
