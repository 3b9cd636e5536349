// hermes web UI: lanes, a lane's timeline with time travel, transcripts.
// Plain JavaScript, no dependencies, no requests to any other origin. Every
// value from the API reaches the page through textContent, never as HTML.
"use strict";

const TOKEN_KEY = "hermes.token";
const PAGE = 25;

const $ = (id) => document.getElementById(id);

// el builds an element: el("a", {href: "#"}, "text", child…).
function el(tag, attrs, ...children) {
  const n = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") n.className = v;
    else if (k === "text") n.textContent = v;
    else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
    else n.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    n.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return n;
}

// ---- API access -----------------------------------------------------------

class Unauthorized extends Error {}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function headers() {
  const t = token();
  return t ? { Authorization: "Bearer " + t } : {};
}

// api GETs a /v1 path and returns its JSON; a 401 shows the login prompt.
async function api(path, opts = {}) {
  const r = await fetch(path, { headers: headers(), cache: "no-store", credentials: "omit", signal: opts.signal });
  if (r.status === 401) {
    showLogin();
    throw new Unauthorized("token required");
  }
  const body = await r.json().catch(() => null);
  if (!r.ok) {
    const msg = body && body.error ? body.error.code + ": " + body.error.message : "HTTP " + r.status;
    const err = new Error(msg);
    err.status = r.status;
    throw err;
  }
  return body;
}

function showError(err) {
  if (err instanceof Unauthorized || (err && err.name === "AbortError")) return;
  const p = $("error");
  p.textContent = String(err && err.message ? err.message : err);
  p.hidden = false;
}

function clearError() { $("error").hidden = true; }

// ---- formatting -------------------------------------------------------------

// when renders an API time ("2030-05-10T11:00:00.000000Z") for reading.
function when(iso) {
  if (!iso) return "—";
  return iso.replace("T", " ").replace(/\.0+Z$/, "Z").replace(/Z$/, "");
}

// seconds turns an API time into Unix seconds with microseconds (the unit
// of message timestamps).
function seconds(iso) {
  const frac = /\.(\d+)/.exec(iso);
  return Math.floor(Date.parse(iso) / 1000) + (frac ? Number("0." + frac[1]) : 0);
}

function fromSeconds(s) {
  return new Date(s * 1000).toISOString().replace("T", " ").replace(/\.\d+Z$/, "");
}

function show(v) {
  if (v === null || v === undefined) return "null";
  if (typeof v === "string") return v === "" ? '""' : v;
  if (typeof v === "object") return JSON.stringify(v);
  return String(v);
}

function stateBadges(e) {
  const out = [];
  if (e.suspended) out.push(["suspended", "bad"]);
  if (e.resume_pending) out.push(["resume pending", "warn"]);
  if (e.open_turn_id) out.push(["turn open", "info"]);
  if (e.was_auto_reset) out.push(["auto-reset: " + (e.auto_reset_reason || "?"), "bad"]);
  if (e.previous_session_id) out.push(["replaced " + e.previous_session_id, "ok"]);
  if (e.active_processes > 0) out.push([e.active_processes + " processes", "info"]);
  return out.map(([t, c]) => el("span", { class: "badge " + c }, t));
}

// ---- views and routing ------------------------------------------------------

const views = ["login", "view-lanes", "view-lane", "view-search"];

function showView(id) {
  for (const v of views) $(v).hidden = v !== id;
  $("logout").hidden = !token();
}

function showLogin() {
  showView("login");
  document.title = "hermes — sign in";
  $("token").focus();
}

function route() {
  clearError();
  const h = location.hash || "#/";
  if (h.startsWith("#/lane/")) {
    const [key, query] = h.slice("#/lane/".length).split("?");
    const v = new URLSearchParams(query || "").get("v");
    openLane(decodeURIComponent(key), v ? Number(v) : 0);
  } else if (h.startsWith("#/search")) {
    openSearch(new URLSearchParams(h.split("?")[1] || "").get("q") || "");
  } else {
    openLanes();
  }
}

// ---- lanes ------------------------------------------------------------------

const lanes = { offset: 0, total: 0, filled: false, timer: 0, minPosition: 0 };

function laneQuery() {
  const f = new FormData($("lane-filters"));
  const q = new URLSearchParams();
  for (const [k, v] of f) if (v) q.set(k, v);
  q.set("limit", PAGE);
  q.set("offset", lanes.offset);
  if (lanes.minPosition) q.set("min_position", lanes.minPosition);
  return q;
}

async function openLanes() {
  showView("view-lanes");
  document.title = "hermes — lanes";
  await loadLanes();
}

function fillSelect(sel, values) {
  const cur = sel.value;
  while (sel.options.length > 1) sel.remove(1);
  for (const v of values) sel.add(new Option(v, v));
  sel.value = values.includes(cur) ? cur : "";
}

async function loadLanes() {
  let page;
  try {
    page = await api("/v1/lanes?" + laneQuery());
  } catch (err) {
    showError(err);
    return;
  }
  clearError();
  startLive(page.head);
  fillSelect($("f-platform"), page.platforms);
  fillSelect($("f-chat"), page.chat_types);
  lanes.total = page.total;
  const rows = $("lane-rows");
  rows.replaceChildren(...page.lanes.map((e) => el("tr", {},
    el("td", { "data-label": "Lane" }, el("a", { class: "key", href: "#/lane/" + encodeURIComponent(e.session_key) }, e.session_key),
      e.display_name ? el("div", { class: "muted" }, e.display_name) : null),
    el("td", { "data-label": "Platform" }, e.platform),
    el("td", { "data-label": "Chat" }, e.chat_type),
    el("td", { "data-label": "Session", class: "mono" }, e.session_id),
    el("td", { "data-label": "State" }, ...stateBadges(e)),
    el("td", { "data-label": "Last activity" }, el("time", { datetime: e.updated_at }, when(e.updated_at))),
  )));
  const first = page.total === 0 ? 0 : page.offset + 1;
  $("lane-count").textContent = page.total === 0 ? "No lane matches." :
    `Lanes ${first}–${page.offset + page.lanes.length} of ${page.total}, most recently active first.`;
  const pages = Math.max(1, Math.ceil(page.total / PAGE));
  $("page-info").textContent = `Page ${Math.floor(page.offset / PAGE) + 1} of ${pages}`;
  $("page-prev").disabled = page.offset === 0;
  $("page-next").disabled = page.offset + PAGE >= page.total;
  if (!lanes.filled) {
    lanes.filled = true;
    performance.mark("hermes:lanes-rendered");
  }
}

function refreshLanesSoon(position) {
  lanes.minPosition = Math.max(lanes.minPosition, position || 0);
  clearTimeout(lanes.timer);
  lanes.timer = setTimeout(() => { if (!$("view-lanes").hidden) loadLanes(); }, 300);
}

// ---- a lane's timeline and time travel ---------------------------------------

const lane = { key: "", now: "", items: [], total: 0, index: 0, until: null, timer: 0, followEnd: true, txFor: "", txMessages: [] };

async function fetchTimeline(key) {
  const items = [];
  let total = 0;
  let now = "";
  for (let from = 1; ; ) {
    const page = await api(`/v1/sessions/${encodeURIComponent(key)}/timeline?from_version=${from}&limit=1000`);
    items.push(...page.items);
    total = page.total;
    now = page.now;
    if (page.items.length === 0 || items.length >= total || items.length >= 20000) break;
    from = page.items[page.items.length - 1].version + 1;
  }
  return { items, total, now };
}

async function openLane(key, version) {
  showView("view-lane");
  document.title = "hermes — " + key;
  $("lane-title").textContent = key;
  const same = lane.key === key;
  lane.key = key;
  let tl;
  try {
    tl = await fetchTimeline(key);
  } catch (err) {
    showError(err);
    return;
  }
  if (!lanesStarted) api("/v1/lanes?limit=1").then((p) => startLive(p.head), () => {});
  lane.items = tl.items;
  lane.total = tl.total;
  lane.now = tl.now;
  const n = lane.items.length;
  $("ev-more").textContent = n < tl.total ? `Showing the first ${n} of ${tl.total} events.` : `${n} events.`;
  const slider = $("tt-slider");
  slider.max = Math.max(1, n);
  $("tt-version").max = Math.max(1, n);
  renderTimeline();
  let idx = n - 1;
  if (version > 0) idx = lane.items.findIndex((it) => it.version === version);
  else if (same && !lane.followEnd) idx = Math.min(lane.index, n - 1);
  lane.until = null;
  select(idx < 0 ? n - 1 : idx, false);
  const first = lane.items[0];
  const last = lane.items[n - 1];
  $("lane-sub").textContent = first ? `${first.entry.platform} · ${first.entry.chat_type} · ${n} events from ${when(first.time)} to ${when(last.time)}` : "";
}

function renderTimeline() {
  const list = $("timeline");
  list.replaceChildren(...lane.items.map((it, i) => {
    const li = el("li", { class: "ev cat-" + it.category + (it.reset ? " reset" : ""), id: "ev-" + it.version, "data-version": it.version, "data-type": it.type },
      el("div", { class: "ev-head" },
        el("span", { class: "cat cat-" + it.category }, it.category),
        el("time", { datetime: it.time }, when(it.time)),
        el("span", { class: "ver" }, "v" + it.version),
        el("code", { class: "type" }, it.type),
        el("button", { type: "button", class: "link", onclick: () => { lane.until = null; select(i, true); }, "aria-label": `Show the lane as of version ${it.version}` }, "state here"),
      ),
      el("p", { class: "summary" }, it.summary || it.type),
    );
    if (it.reset) {
      li.append(el("div", { class: "reset-box" },
        el("strong", {}, it.reset.kind === "auto_reset" ? "Auto-reset (" + (it.reset.reason || "?") + ")" : "Session replaced (" + it.reset.kind + ")"),
        el("p", { class: "why" }, it.reset.why),
        el("p", {}, "Replaced ", el("code", { class: "prev-session" }, it.reset.previous_session_id || "none"), " with ", el("code", {}, it.reset.session_id),
          it.reset.had_activity ? " (the old session had activity)" : " (the old session had no activity)"),
      ));
    }
    if (it.changes.length) {
      li.append(el("ul", { class: "changes", "aria-label": "Fields changed" }, ...it.changes.map((c) =>
        el("li", {}, el("code", {}, c.field), ": ", el("span", { class: "before" }, show(c.before)), " → ", el("span", { class: "after" }, show(c.after))))));
    }
    return li;
  }));
}

const stateFields = [
  ["session_id", "Session"], ["previous_session_id", "Replaced session"], ["created_at", "Session started"], ["updated_at", "Last activity"],
  ["suspended", "Suspended"], ["suspend_reason", "Suspend reason"], ["resume_pending", "Resume pending"], ["resume_reason", "Resume reason"],
  ["was_auto_reset", "Auto-reset notice due"], ["auto_reset_reason", "Auto-reset reason"], ["open_turn_id", "Open turn"],
  ["active_processes", "Background processes"], ["had_activity", "Had activity"], ["total_tokens", "Tokens"], ["estimated_cost_usd", "Cost (USD)"],
];

// select moves time travel to timeline item i.
function select(i, focusSlider) {
  if (i < 0 || !lane.items.length) return;
  const it = lane.items[i];
  lane.index = i;
  lane.followEnd = i === lane.items.length - 1 && lane.until === null;
  const slider = $("tt-slider");
  slider.value = i + 1;
  const label = `version ${it.version} of ${lane.items.length}, ${when(it.time)}, ${it.type}`;
  slider.setAttribute("aria-valuetext", label);
  $("tt-version").value = it.version;
  if (lane.until === null) $("tt-time").value = it.time;
  $("tt-prev").disabled = i === 0;
  $("tt-next").disabled = i === lane.items.length - 1;
  $("tt-at").textContent = lane.until === null ? `As of ${label}.` : `As of ${when(lane.until)} (version ${it.version}, ${it.type}).`;
  const e = it.entry;
  $("tt-state").replaceChildren(...stateFields.flatMap(([k, name]) => [
    el("dt", {}, name),
    el("dd", { id: "state-" + k.replaceAll("_", "-"), class: typeof e[k] === "string" ? "mono" : "" }, k.endsWith("_at") ? when(e[k]) : show(e[k])),
  ]));
  const nr = it.next_reset;
  // Was the reset due before the lane's next event (or is it due now)?
  const next = lane.items[i + 1];
  let due = "";
  if (nr.at && next && seconds(nr.at) <= seconds(next.time)) due = ` — due before the next event (${when(next.time)})`;
  else if (nr.at && !next && lane.now && seconds(nr.at) <= seconds(lane.now)) due = " — due now: the next message gets a new session";
  $("tt-why").textContent = nr.why + due;
  $("tt-why").className = "why" + (nr.reason ? " due" : "");
  for (const li of document.querySelectorAll("#timeline > li.current")) li.classList.remove("current");
  const cur = $("ev-" + it.version);
  if (cur) {
    cur.classList.add("current");
    cur.setAttribute("aria-current", "step");
  }
  for (const li of document.querySelectorAll("#timeline > li[aria-current]")) if (li !== cur) li.removeAttribute("aria-current");
  if (focusSlider) slider.focus();
  history.replaceState(null, "", "#/lane/" + encodeURIComponent(lane.key) + "?v=" + it.version);
  showTranscript(i);
}

// showTranscript lists the messages of the session at item i that existed
// by then: up to the next event (or the instant asked for).
async function showTranscript(i) {
  const it = lane.items[i];
  const sid = it.entry.session_id;
  const next = lane.items[i + 1];
  const until = lane.until !== null ? seconds(lane.until) : next ? seconds(next.time) : Infinity;
  const inclusive = lane.until !== null;
  const list = $("tx-messages");
  if (!sid) {
    $("tx-sub").textContent = "No session at this point.";
    list.replaceChildren();
    return;
  }
  if (lane.txFor !== sid) {
    try {
      const body = await api(`/v1/transcripts/${encodeURIComponent(sid)}/messages?include_inactive=true`);
      lane.txMessages = body.messages;
    } catch (err) {
      lane.txMessages = [];
      if (err.status !== 404) showError(err);
    }
    lane.txFor = sid;
  }
  if (lane.items[lane.index] !== it) return; // moved on meanwhile
  const shown = lane.txMessages.filter((m) => inclusive ? m.timestamp <= until : m.timestamp < until);
  const later = lane.txMessages.length - shown.length;
  const n = (k, what) => `${k} ${what}${k === 1 ? "" : "s"}`;
  $("tx-sub").textContent = `Session ${sid}: ${n(shown.length, "message")} by then` + (later ? `, ${later} later.` : ".");
  list.replaceChildren(...shown.map((m) => el("li", { class: "msg role-" + m.role + (m.active ? "" : " rewound") },
    el("div", { class: "msg-head" }, el("strong", {}, m.role), " ", el("time", {}, fromSeconds(m.timestamp)),
      m.active ? null : el("span", { class: "badge warn" }, "rewound")),
    el("p", {}, typeof m.content === "string" ? m.content : JSON.stringify(m.content)),
  )));
}

async function travelTo(ev) {
  ev.preventDefault();
  clearError();
  const t = $("tt-time").value.trim();
  const v = Number($("tt-version").value);
  const atItem = lane.items[lane.index];
  if (t && (!atItem || t !== atItem.time)) {
    // An instant: ask the API which version was current then.
    try {
      const e = await api(`/v1/sessions/${encodeURIComponent(lane.key)}/state?at_time=${encodeURIComponent(t)}`);
      lane.until = t;
      const i = lane.items.findIndex((it) => it.version === e.version);
      select(i, false);
    } catch (err) {
      showError(err);
    }
    return;
  }
  const i = lane.items.findIndex((it) => it.version === v);
  if (i < 0) {
    showError(new Error(`version ${v} is not in this timeline`));
    return;
  }
  lane.until = null;
  select(i, false);
}

function refreshLaneSoon() {
  clearTimeout(lane.timer);
  lane.timer = setTimeout(() => {
    if (!$("view-lane").hidden) {
      lane.txFor = "";
      openLane(lane.key, lane.followEnd ? 0 : lane.items[lane.index].version);
    }
  }, 300);
}

// ---- search -------------------------------------------------------------------

// snippet renders the API's ">>>match<<<" markers as <mark>.
function snippet(text) {
  const p = el("p", { class: "snippet" });
  const parts = String(text).split(/(>>>|<<<)/);
  let marked = false;
  for (const part of parts) {
    if (part === ">>>") marked = true;
    else if (part === "<<<") marked = false;
    else if (part) p.append(marked ? el("mark", {}, part) : document.createTextNode(part));
  }
  return p;
}

async function openSearch(q) {
  showView("view-search");
  document.title = "hermes — search";
  $("s-q").value = q;
  if (!q) {
    $("search-results").replaceChildren();
    $("search-count").textContent = "";
    return;
  }
  let body;
  try {
    body = await api("/v1/search?limit=50&q=" + encodeURIComponent(q));
  } catch (err) {
    showError(err);
    return;
  }
  $("search-count").textContent = body.results.length ? `${body.results.length} matches.` : "No match.";
  $("search-results").replaceChildren(...body.results.map((r) => el("li", { class: "result" },
    el("div", { class: "msg-head" }, el("strong", {}, r.role), " in ", el("code", {}, r.session_id), " · ", r.source, " · ", fromSeconds(r.timestamp)),
    snippet(r.snippet),
    el("button", { type: "button", class: "link", onclick: () => openSessionLane(r.session_id) }, "Open its lane at this session"),
  )));
}

// openSessionLane opens the lane that holds session sid now or held it just
// before its current one, at the last version on that session.
async function openSessionLane(sid) {
  try {
    const page = await api("/v1/lanes?limit=1&q=" + encodeURIComponent(sid));
    const e = page.lanes.find((l) => l.session_id === sid || l.previous_session_id === sid);
    if (!e) {
      showError(new Error("no live lane holds session " + sid + " now or just before its current one"));
      return;
    }
    const tl = await fetchTimeline(e.session_key);
    let v = 0;
    for (const it of tl.items) if (it.entry.session_id === sid) v = it.version;
    location.hash = "#/lane/" + encodeURIComponent(e.session_key) + (v ? "?v=" + v : "");
  } catch (err) {
    showError(err);
  }
}

// ---- live updates: the SSE stream read with fetch (an EventSource cannot
// send the Authorization header) ------------------------------------------------

let lanesStarted = false;
let liveAbort = null;

function setLive(text, ok) {
  const s = $("live");
  s.textContent = text;
  s.className = "live" + (ok ? " on" : "");
}

function startLive(head) {
  if (lanesStarted) return;
  lanesStarted = true;
  setLive("connecting…", false);
  follow(head + 1, 1000);
}

async function follow(from, backoff) {
  liveAbort = new AbortController();
  let next = from;
  try {
    const r = await fetch("/v1/events?follow=1&from_position=" + next, { headers: headers(), cache: "no-store", credentials: "omit", signal: liveAbort.signal });
    if (r.status === 401) {
      lanesStarted = false;
      setLive("offline", false);
      return;
    }
    if (!r.ok || !r.body) throw new Error("HTTP " + r.status);
    setLive("live", true);
    backoff = 1000;
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        const ev = { id: 0, type: "", data: "" };
        for (const line of block.split("\n")) {
          if (line.startsWith("id: ")) ev.id = Number(line.slice(4));
          else if (line.startsWith("event: ")) ev.type = line.slice(7);
          else if (line.startsWith("data: ")) ev.data += line.slice(6);
        }
        if (!ev.data) continue;
        if (ev.type === "dropped") {
          // The page fell too far behind: resume where the server says,
          // and reload what is on screen, which may have missed events.
          next = JSON.parse(ev.data).resume_from || ev.id + 1;
          refreshLanesSoon(0);
          if (lane.key) refreshLaneSoon();
          throw new Error("dropped");
        }
        next = ev.id + 1;
        onEvent(JSON.parse(ev.data));
      }
    }
  } catch (err) {
    if (err.name === "AbortError") return;
  }
  setLive("reconnecting…", false);
  setTimeout(() => follow(next, Math.min(backoff * 2, 30000)), backoff);
}

function onEvent(env) {
  if (typeof env.stream !== "string") return;
  if (lane.txFor && env.stream === "transcript-" + lane.txFor && !$("view-lane").hidden) {
    lane.txFor = "";
    showTranscript(lane.index);
  }
  if (!env.stream.startsWith("lane-")) return;
  refreshLanesSoon(env.position);
  if (lane.key && env.stream === "lane-" + lane.key) refreshLaneSoon();
}

// ---- wiring ---------------------------------------------------------------------

function init() {
  $("login-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const t = $("token").value.trim();
    sessionStorage.setItem(TOKEN_KEY, t);
    try {
      await api("/v1/lanes?limit=1");
    } catch (err) {
      sessionStorage.removeItem(TOKEN_KEY);
      $("logout").hidden = true;
      const p = $("login-error");
      p.textContent = err instanceof Unauthorized ? "That token was refused." : String(err.message);
      p.hidden = false;
      return;
    }
    $("login-error").hidden = true;
    $("token").value = "";
    route();
  });
  $("logout").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    if (liveAbort) liveAbort.abort();
    lanesStarted = false;
    showLogin();
  });
  let typing = 0;
  $("lane-filters").addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { lanes.offset = 0; loadLanes(); }, 250);
  });
  $("lane-filters").addEventListener("submit", (ev) => { ev.preventDefault(); lanes.offset = 0; loadLanes(); });
  $("page-prev").addEventListener("click", () => { lanes.offset = Math.max(0, lanes.offset - PAGE); loadLanes(); });
  $("page-next").addEventListener("click", () => { lanes.offset += PAGE; loadLanes(); });
  $("tt-slider").addEventListener("input", (ev) => { lane.until = null; select(Number(ev.target.value) - 1, false); });
  $("tt-prev").addEventListener("click", () => { lane.until = null; select(lane.index - 1, false); });
  $("tt-next").addEventListener("click", () => { lane.until = null; select(lane.index + 1, false); });
  $("tt-form").addEventListener("submit", travelTo);
  $("search-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    location.hash = "#/search?q=" + encodeURIComponent($("s-q").value);
  });
  window.addEventListener("hashchange", route);
  route();
}

init();
