package api_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// attackPage is a page of another origin that tries every way a web page
// can make a browser write to hermes (base is hermes' origin, sid an ended
// transcript). It reports what it could see to its own origin's /report.
const attackPage = `<!doctype html>
<html><body>
<iframe name="f1"></iframe><iframe name="f2"></iframe>
<form id="prune" method="POST" enctype="text/plain" target="f1" action="{{base}}/v1/maintenance/prune-sessions">
<input name='{"older_than_days":0,"x":"' value='"}'>
</form>
<form id="restart" method="POST" enctype="text/plain" target="f2" action="{{base}}/v1/admin/restart">
<input name='{"x":"' value='"}'>
</form>
<script>
const base = "{{base}}";
const prune = '{"older_than_days":0}';
const results = {};
async function attempt(name, f) {
  try { const r = await f(); results[name] = r === undefined ? "sent" : r; }
  catch (e) { results[name] = "error: " + e.name; }
}
function submitted(form, frame) {
  return new Promise(resolve => {
    const t = setTimeout(() => resolve("timeout"), 20000);
    document.getElementsByName(frame)[0].onload = () => { clearTimeout(t); resolve("loaded"); };
    document.getElementById(form).submit();
  });
}
(async () => {
  await attempt("prune text/plain", () => fetch(base + "/v1/maintenance/prune-sessions", {method: "POST", headers: {"Content-Type": "text/plain"}, body: prune}).then(r => "read " + r.status));
  await attempt("prune no-cors", () => fetch(base + "/v1/maintenance/prune-sessions", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: prune}).then(r => r.type));
  await attempt("restart no-cors", () => fetch(base + "/v1/admin/restart", {method: "POST", mode: "no-cors"}).then(r => r.type));
  await attempt("resolve no-cors", () => fetch(base + "/v1/sessions/resolve", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: '{"source":{"platform":"telegram","chat_id":"66"}}'}).then(r => r.type));
  await attempt("delete", () => fetch(base + "/v1/transcripts/{{sid}}", {method: "DELETE"}).then(r => "read " + r.status));
  await attempt("prune application/json", () => fetch(base + "/v1/maintenance/prune-sessions", {method: "POST", headers: {"Content-Type": "application/json"}, body: prune}).then(r => "read " + r.status));
  await attempt("read export", () => fetch(base + "/v1/export").then(r => r.text()).then(t => "read " + t.length + " bytes"));
  await attempt("beacon", () => String(navigator.sendBeacon(base + "/v1/maintenance/prune-sessions", new Blob([prune], {type: "text/plain"}))));
  results["form prune"] = await submitted("prune", "f1");
  results["form restart"] = await submitted("restart", "f2");
  await fetch("/report", {method: "POST", body: JSON.stringify(results)});
})();
</script>
</body></html>`

// seen is one request hermes answered.
type seen struct {
	method, path, site, origin, contentType string
	status                                  int
}

// statusRecorder keeps the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// TestBrowserCannotDriveHermes opens a page from another origin in headless
// Chromium (installed by .ci/run) and lets it try to prune, restart,
// resolve, delete and read through fetch (cors and no-cors), a JSON fetch
// (with its preflight), sendBeacon and auto-submitted text/plain forms.
// hermes must see the requests and refuse every one: the log does not move,
// no restart is requested, the transcript survives, and the page reads
// nothing. The page is served twice: from localhost (cross-site to
// 127.0.0.1) and from 127.0.0.1 on another port (same-site, cross-origin).
func TestBrowserCannotDriveHermes(t *testing.T) {
	chromium := findChromium(t)
	var restarts atomic.Int32
	h := newHarness(t, withRestart(func() { restarts.Add(1) }))
	sid := h.resolve(dm("1")).Entry.SessionID
	h.appendMessage(sid, "user", "a private conversation")
	h.call("POST", transcript(sid, "/end"), map[string]string{"reason": "user_exit"}, http.StatusOK, nil)
	h.call("POST", "/v1/clock", map[string]string{"advance": "1m"}, http.StatusOK, nil)

	// hermes, behind a recorder: the test must show the browser did send
	// the requests, and what hermes answered.
	var mu sync.Mutex
	var requests []seen
	handler := h.server.Handler()
	hermes := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		handler.ServeHTTP(rec, r)
		mu.Lock()
		requests = append(requests, seen{r.Method, r.URL.Path, r.Header.Get("Sec-Fetch-Site"), r.Header.Get("Origin"), r.Header.Get("Content-Type"), rec.status})
		mu.Unlock()
	}))
	t.Cleanup(hermes.Close)
	base := hermes.URL // http://127.0.0.1:port

	reports := make(chan map[string]string, 1)
	page := strings.NewReplacer("{{base}}", base, "{{sid}}", sid).Replace(attackPage)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, page)
		case "/report":
			var got map[string]string
			if err := json.NewDecoder(r.Body).Decode(&got); err != nil {
				t.Errorf("attack page report: %v", err)
			}
			select {
			case reports <- got:
			default:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(attacker.Close)
	_, port, err := net.SplitHostPort(attacker.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct{ name, url, site string }{
		{"cross-site page", "http://localhost:" + port + "/", "cross-site"},
		{"same-site page on another port", "http://127.0.0.1:" + port + "/", "same-site"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := h.head()
			mu.Lock()
			requests = nil
			mu.Unlock()
			report := runChromium(t, chromium, tt.url, reports)
			t.Logf("page report: %v", report)

			for name, got := range report {
				if strings.HasPrefix(got, "read ") {
					t.Errorf("%s: the page read hermes' answer (%s)", name, got)
				}
			}
			mu.Lock()
			got := append([]seen(nil), requests...)
			mu.Unlock()
			arrived := map[string]int{}
			for _, s := range got {
				arrived[s.method+" "+s.path]++
				if s.status != http.StatusForbidden {
					t.Errorf("%s %s (Origin %q, Sec-Fetch-Site %q, Content-Type %q) = %d, want 403",
						s.method, s.path, s.origin, s.site, s.contentType, s.status)
				}
				if s.site != tt.site {
					t.Errorf("%s %s: Sec-Fetch-Site %q, want %q", s.method, s.path, s.site, tt.site)
				}
			}
			// The attacks did reach hermes (a browser that sent nothing
			// would prove nothing).
			for _, want := range []string{
				"POST /v1/maintenance/prune-sessions", "POST /v1/admin/restart", "POST /v1/sessions/resolve",
				"OPTIONS /v1/transcripts/" + sid, "OPTIONS /v1/maintenance/prune-sessions", "GET /v1/export",
			} {
				if arrived[want] == 0 {
					t.Errorf("hermes never saw %s; it saw %v", want, arrived)
				}
			}
			if n := arrived["POST /v1/maintenance/prune-sessions"]; n < 4 {
				t.Errorf("hermes saw %d prune POSTs, want 4 (fetch, no-cors fetch, beacon, form)", n)
			}
			if after := h.head(); after != before {
				t.Errorf("head = %d after, %d before, want the log unchanged", after, before)
			}
		})
	}
	if n := restarts.Load(); n != 0 {
		t.Errorf("restart requested %d times, want 0", n)
	}
	h.call("GET", transcript(sid, ""), nil, http.StatusOK, nil)
}

// findChromium returns the Chromium binary. Without one the test skips,
// except in CI (CI set), where .ci/run installs it and its absence fails.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed; CI must run the headless-browser test (.ci/run installs it with apt-get install chromium)")
	}
	t.Skip("chromium is not installed (apt-get install chromium); the headless-browser test is skipped outside CI")
	return ""
}

// runChromium opens url in headless Chromium and returns the page's
// report, failing after a generous deadline. Chromium and its children are
// killed by process group afterwards.
func runChromium(t *testing.T, chromium, url string, reports <-chan map[string]string) map[string]string {
	t.Helper()
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-background-networking",
		"--user-data-dir="+t.TempDir(), url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	const deadline = 120 * time.Second
	select {
	case r := <-reports:
		return r
	case err := <-exited:
		t.Fatalf("chromium exited (%v) before the page reported:\n%s", err, stderr.String())
	case <-time.After(deadline):
		t.Fatalf("the page did not report within %v:\n%s", deadline, stderr.String())
	}
	return nil
}

// syncBuffer collects a child's output safely.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
