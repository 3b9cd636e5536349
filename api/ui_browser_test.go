package api_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// uiWait bounds each step of the browser tests: generous, because the
// machine may be loaded; every wait ends as soon as its condition holds.
const uiWait = 90 * time.Second

// browser is one headless Chromium tab driven over the DevTools protocol.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// newBrowser starts Chromium (findChromium: skipped outside CI when it is
// missing) with a fresh profile, so the first load has an empty cache.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	chromium := findChromium(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first Run starts the browser; it must not carry a timeout (that
	// would stop the browser with it), so it does nothing else.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	return &browser{t: t, ctx: ctx}
}

// do runs steps within uiWait.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.bodyText())
	}
}

// eval evaluates a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// until waits until the JavaScript expression is truthy.
func (b *browser) until(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiWait+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool]("!!("+expr+")", chromedp.WithPollingTimeout(uiWait), chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, b.bodyText())
	}
}

func (b *browser) text(css string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, css))
}

// clear empties an input.
func (b *browser) clear(css string) {
	b.t.Helper()
	eval[bool](b, fmt.Sprintf(`(() => { document.querySelector(%q).value = ""; return true; })()`, css))
}

// bodyText is the visible text of the page, for failure messages.
func (b *browser) bodyText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	return s
}

// screenshot writes docs/<name> when HERMES_UPDATE_SCREENSHOTS is set: the
// README's pictures come from this test, not from every run.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if os.Getenv("HERMES_UPDATE_SCREENSHOTS") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, uiWait)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join("..", "docs", name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Fatalf("write %s: %v", path, err)
	}
	b.t.Logf("wrote %s (%d bytes)", path, len(png))
}

// TestUIBrowser opens the web UI in headless Chromium and answers "why did
// the bot forget me?" the way an operator would: the lane list, the lane
// the idle rule reset, its timeline, the slider moved back to before the
// reset (the old session id and the forecast that explains it), the
// transcript of that moment, then a search across transcripts. Along the
// way it checks live updates, the phone width, and the page's weight and
// time to first render.
func TestUIBrowser(t *testing.T) {
	h := newUIHarness(t, "", uiConfig())
	st := seedUI(h)
	b := newBrowser(t)

	// 1. The lane list.
	b.do("open /ui/", chromedp.Navigate(h.url("/ui/")))
	b.until("the lane list", `document.querySelectorAll("#lane-rows tr").length === 4`)
	b.until("the live stream", `document.getElementById("live").textContent === "live"`)
	metrics := eval[map[string]float64](b, `(() => {
		const nav = performance.getEntriesByType("navigation")[0];
		const res = performance.getEntriesByType("resource");
		const fcp = performance.getEntriesByName("first-contentful-paint")[0];
		const lanes = performance.getEntriesByName("hermes:lanes-rendered")[0];
		const static_ = res.filter(r => r.name.includes("/ui/")).reduce((n, r) => n + r.transferSize, nav.transferSize);
		return {
			total: res.reduce((n, r) => n + r.transferSize, nav.transferSize),
			static: static_,
			requests: res.length + 1,
			fcp: fcp ? fcp.startTime : -1,
			lanes: lanes ? lanes.startTime : -1,
			external: res.filter(r => !r.name.startsWith(location.origin)).length,
		};
	})()`)
	t.Logf("first load: %.0f bytes transferred in %.0f requests (%.0f bytes of page files), first contentful paint %.0f ms, lane list rendered %.0f ms",
		metrics["total"], metrics["requests"], metrics["static"], metrics["fcp"], metrics["lanes"])
	if metrics["external"] != 0 {
		t.Errorf("the page made %v requests to other origins", metrics["external"])
	}
	if metrics["static"] > 64<<10 {
		t.Errorf("the page files weigh %.0f bytes on first load, over the 64 KiB budget", metrics["static"])
	}
	b.screenshot("ui-lanes.png")

	// Live: a lane created now appears without a reload (the SSE stream,
	// read with fetch).
	fresh := h.resolve(source{Platform: "slack", ChatID: "C9", ChatType: "group", ChatName: "#support", UserID: "U1"}).Entry.SessionKey
	b.until("the new lane, live", fmt.Sprintf(`[...document.querySelectorAll("#lane-rows a")].some(a => a.textContent === %q)`, fresh))

	// Find the lane the idle policy reset: the state filter, then a search
	// by a part of its key typed on the keyboard.
	eval[bool](b, `(() => { const s = document.getElementById("f-state"); s.value = "recently_reset"; s.dispatchEvent(new Event("input", {bubbles: true})); return true; })()`)
	b.do("type a key filter", chromedp.SendKeys(chromedp.CSS("#f-q"), "4242"))
	b.until("the one reset lane", fmt.Sprintf(`document.querySelectorAll("#lane-rows tr").length === 1 && document.querySelector("#lane-rows a").textContent === %q`, st.key))
	if got := b.text("#lane-rows tr"); !strings.Contains(got, "replaced "+st.oldSID) {
		t.Errorf("the reset lane's row = %q, want it to say it replaced %s", got, st.oldSID)
	}

	// 2. Its timeline: the reset highlighted with its reason and the
	// session it replaced.
	b.do("open the lane", chromedp.Click(chromedp.CSS("#lane-rows a")))
	b.until("the timeline", `document.querySelector("#timeline li.reset") !== null`)
	reset := fmt.Sprintf("#ev-%d", st.resetVersion)
	if got := b.text(reset + " .prev-session"); got != st.oldSID {
		t.Errorf("the reset names the replaced session %q, want %q", got, st.oldSID)
	}
	wantWhy := "idle: last activity 2030-05-10 11:00, idle_minutes 60, reset at 12:00:00.000001"
	if got := b.text(reset + " .why"); !strings.HasPrefix(got, wantWhy) {
		t.Errorf("the reset's why = %q, want it to start %q", got, wantWhy)
	}
	if got := b.text("#state-session-id"); got != st.newSID {
		t.Errorf("the state at the end = session %q, want %q", got, st.newSID)
	}

	// 3. Time travel with the keyboard: Home (version 1), then right
	// arrows to the version just before the reset.
	b.do("focus the slider", chromedp.Focus(chromedp.CSS("#tt-slider")), chromedp.KeyEvent(kb.Home))
	for v := uint64(1); v < st.resetVersion-1; v++ {
		b.do("arrow right", chromedp.KeyEvent(kb.ArrowRight))
	}
	b.until("the version before the reset", fmt.Sprintf(`document.getElementById("tt-version").value === "%d"`, st.resetVersion-1))
	if got := b.text("#state-session-id"); got != st.oldSID {
		t.Errorf("before the reset the page shows session %q, want the old %q", got, st.oldSID)
	}
	if got := b.text("#tt-why"); got != wantWhy+" — due before the next event (2030-05-10 12:30:00)" {
		t.Errorf("the next-reset text before the reset = %q, want %q", got, wantWhy)
	}
	if got := eval[string](b, `document.getElementById("tt-slider").getAttribute("aria-valuetext")`); !strings.Contains(got, fmt.Sprintf("version %d", st.resetVersion-1)) {
		t.Errorf("the slider's aria-valuetext = %q", got)
	}

	// 4. The transcript as it was: the old session's messages, the rewound
	// exchange shown as such.
	b.until("the old transcript", `document.querySelectorAll("#tx-messages li").length === 4`)
	if got := b.text("#tx-messages"); !strings.Contains(got, st.word) {
		t.Errorf("the transcript before the reset = %q, want %q in it", got, st.word)
	}
	if n := eval[float64](b, `document.querySelectorAll("#tx-messages li.rewound").length`); n != 2 {
		t.Errorf("%v rewound messages shown, want 2", n)
	}
	b.screenshot("ui-timeline.png")

	// An instant instead of a version: 12:29, the minute before the reset.
	b.clear("#tt-time")
	b.do("type an instant", chromedp.SendKeys(chromedp.CSS("#tt-time"), "2030-05-10T12:29:00Z"+kb.Enter))
	b.until("the state at 12:29", `document.getElementById("tt-at").textContent.startsWith("As of 2030-05-10 12:29")`)
	if got := b.text("#state-session-id"); got != st.oldSID {
		t.Errorf("at 12:29 the page shows session %q, want %q", got, st.oldSID)
	}

	// A phone's width: nothing wider than the screen.
	b.do("phone width", chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	b.until("the timeline fits 375 px", `document.documentElement.scrollWidth <= 375`)

	b.do("desktop width", chromedp.EmulateViewport(1280, 900))

	// 5. Search across transcripts, with the API's snippet.
	b.do("open search", chromedp.Click(chromedp.CSS("#nav-search")))
	b.do("search", chromedp.SendKeys(chromedp.CSS("#s-q"), st.word+kb.Enter))
	b.until("the snippet", `document.querySelector("#search-results mark") !== null`)
	if got := strings.ToLower(b.text("#search-results mark")); got != st.word {
		t.Errorf("the snippet marks %q, want %q", got, st.word)
	}
	if got := b.text("#search-results"); !strings.Contains(got, st.oldSID) || !strings.Contains(got, "favourite colour") {
		t.Errorf("the search results = %q, want the old session and its words", got)
	}
	b.screenshot("ui-search.png")

	// From a result to its lane, as of that session.
	b.do("open the result's lane", chromedp.Click(chromedp.CSS("#search-results button")))
	b.until("the lane at the old session", fmt.Sprintf(`!document.getElementById("view-lane").hidden && document.getElementById("state-session-id") && document.getElementById("state-session-id").textContent === %q`, st.oldSID))

	// The lane list at a phone's width, too.
	b.do("lanes on a phone", chromedp.EmulateViewport(375, 812, chromedp.EmulateScale(2), chromedp.EmulateMobile), chromedp.Click(chromedp.CSS("#nav-lanes")))
	b.until("the lane list", `!document.getElementById("view-lanes").hidden && document.querySelectorAll("#lane-rows tr").length > 0`)
	b.until("the lane list fits 375 px", `document.documentElement.scrollWidth <= 375`)
	b.screenshot("ui-phone.png")
}

// TestUIBrowserToken: with a token configured, the page without it shows
// the login prompt and no data, keeps no cookie, and shows the lanes once
// the token is given (kept in session storage).
func TestUIBrowserToken(t *testing.T) {
	h := newUIHarness(t, "s3cret-token", uiConfig())
	st := seedUI(h)
	b := newBrowser(t)

	b.do("open /ui/", chromedp.Navigate(h.url("/ui/")))
	b.until("the login prompt", `!document.getElementById("login").hidden`)
	if got := b.text("#live"); got != "offline" {
		t.Errorf("without the token the live badge says %q, want offline (no stream opened)", got)
	}
	if got := b.bodyText(); strings.Contains(got, st.key) || strings.Contains(got, st.oldSID) || strings.Contains(got, "4242") {
		t.Errorf("without the token the page shows data:\n%s", got)
	}
	if n := eval[float64](b, `document.querySelectorAll("#lane-rows tr, #timeline li, #tx-messages li").length`); n != 0 {
		t.Errorf("without the token the page holds %v rows", n)
	}
	if !eval[bool](b, `document.getElementById("view-lanes").hidden && document.getElementById("view-lane").hidden`) {
		t.Error("a data view is visible without the token")
	}

	// A wrong token is refused.
	b.do("wrong token", chromedp.SendKeys(chromedp.CSS("#token"), "nope"+kb.Enter))
	b.until("the refusal", `!document.getElementById("login-error").hidden`)

	b.clear("#token")
	b.do("right token", chromedp.SendKeys(chromedp.CSS("#token"), "s3cret-token"+kb.Enter))
	b.until("the lanes", fmt.Sprintf(`[...document.querySelectorAll("#lane-rows a")].some(a => a.textContent === %q)`, st.key))
	b.until("the live stream, with the token", `document.getElementById("live").textContent === "live"`)
	if got := eval[string](b, `sessionStorage.getItem("hermes.token") + "|" + document.cookie`); got != "s3cret-token|" {
		t.Errorf("session storage token | cookies = %q, want the token and no cookie", got)
	}
}
