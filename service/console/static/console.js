// mcpsubd console: fills the page shells from the local API and follows its SSE stream.
// Every text from the daemon goes into the page as a text node (el() below), never as markup.
"use strict";
(() => {
  const page = document.body.dataset.page;
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const $ = (id) => document.getElementById(id);
  const EVENT_TYPES = ["resource.updated", "subscription.state", "subscription.created",
    "subscription.deleted", "daemon.storage", "webhook.disabled", "delivery.dead", "reset"];
  const NEWEST = "9223372036854775807";

  // ---- DOM and formatting helpers -----------------------------------------------------
  function el(tag, attrs, ...kids) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "text") node.textContent = String(value);
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const kid of kids) {
      if (kid === null || kid === undefined) continue;
      node.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
    }
    return node;
  }
  const clear = (node) => { node.replaceChildren(); return node; };
  const time = (ts) => (ts ? new Date(ts * 1000).toLocaleString() : "–");
  const ago = (ts) => {
    if (!ts) return "never";
    const s = Math.max(0, Date.now() / 1000 - ts);
    if (s < 60) return `${Math.round(s)} s ago`;
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    return `${Math.round(s / 3600)} h ago`;
  };
  const bytes = (n) => (n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} kB` : `${(n / 1048576).toFixed(1)} MB`);
  const GOOD = new Set(["open", "active", "delivered", "connected", "ok", "enabled", "healthy", "succeeded"]);
  const BAD = new Set(["error", "dead", "failing", "login_required", "not_honored", "disabled", "throttled"]);
  function stateTag(state) {
    const s = String(state);
    const tone = GOOD.has(s) ? "ok" : BAD.has(s) ? "bad" : "warn";
    return el("span", { class: `state state-${tone}`, text: s });
  }
  // What the CLIs' safetext.visible escapes in one-line values: controls, bidi controls, lone
  // surrogates, format characters, every space but U+0020, and the fillers and selectors
  // that render as nothing (U+205F-U+206F whole, unassigned ones too, as safetext does). So
  // test://a\u200bb cannot pass for test://ab on a page; tests/console checks both agree.
  const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\u00a0\u1680\u2000-\u200a\u202f\u205f-\u206f\u3000\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u3164\ufe00-\ufe0f\uffa0\u{e0100}-\u{e01ef}\ud800-\udfff]/gu;
  function visible(text) {
    return String(text ?? "").replace(INVISIBLE, (ch) => {
      const code = ch.codePointAt(0);
      const [prefix, width] = code < 0x100 ? ["x", 2] : code < 0x10000 ? ["u", 4] : ["U", 8];
      return `\\${prefix}${code.toString(16).padStart(width, "0")}`;
    });
  }
  // A URI or URL may wrap after its separators (/ . ? & = - _ : #), never inside a word: the
  // text stays one text node per piece, with a <wbr> after each separator.
  function breakable(text) {
    const node = el("span", { class: "uri" });
    for (const piece of visible(text).split(/(?<=[/.?&=_:#-])/)) node.append(piece, el("wbr"));
    return node;
  }
  // One event in words, the same on every page (the subscription page, the Events page).
  function describe(e) {
    const d = e.data || {};
    switch (e.type) {
      case "resource.updated": return `revision ${e.revision}`;
      case "subscription.state":
        return `${d.previous || "?"} → ${d.state}${d.code ? ` (${d.code})` : ""}${d.reason ? `: ${d.reason}` : ""}`;
      case "subscription.created": return "subscribed";
      case "subscription.deleted": return "unsubscribed";
      case "daemon.storage": return `storage ${d.state === "ok" ? "recovered" : d.state}${d.error ? `: ${d.error}` : ""}`;
      case "webhook.disabled": return `target ${d.targetId} disabled${d.reason ? `: ${d.reason}` : ""}`;
      case "delivery.dead":
        return `delivery ${d.deliveryId} to target ${d.targetId} gave up${d.lastStatus ? `: HTTP ${d.lastStatus}` : d.lastError ? `: ${d.lastError}` : ""}`;
      default: return Object.entries(d).map(([k, v]) => `${k} ${v}`).join(", ") || "–";
    }
  }
  function fact(list, term, value) {
    list.append(el("dt", { text: term }), el("dd", {}, value instanceof Node ? value : String(value ?? "–")));
  }

  // ---- notices and the API ------------------------------------------------------------
  function notice(message, info) {
    const box = $("notice");
    if (!box) return;
    box.hidden = !message;
    box.classList.toggle("info", Boolean(info));
    box.textContent = message || "";
  }
  class ApiFailure extends Error {
    constructor(body, status) {
      super(`${body.errorCode || status}: ${body.message || "request failed"}${body.hint ? ` (${body.hint})` : ""}`);
      this.body = body;
      this.status = status;
    }
  }
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const init = { method, headers, credentials: "same-origin" };
    if (method !== "GET") headers["X-CSRF-Token"] = csrf;
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (response.status === 401) {
      location.assign("/ui/login");
      throw new ApiFailure({ errorCode: "LOGIN_REQUIRED", message: "log in again" }, 401);
    }
    const type = response.headers.get("content-type") || "";
    const data = type.includes("json") ? await response.json() : {};
    if (!response.ok) throw new ApiFailure(data, response.status);
    return data;
  }
  const report = (error) => notice(error instanceof Error ? error.message : String(error));
  async function act(button, fn) {
    button.disabled = true;
    try { notice(""); await fn(); } catch (error) { report(error); } finally { button.disabled = false; }
  }

  // ---- live: the API's SSE stream, with the connected/reconnecting indicator ------------
  function setLive(state, label) {
    const box = $("live");
    if (!box) return;
    box.dataset.state = state;
    $("live-text").textContent = label;
  }
  function live(query, onEvent, after) {
    let cursor = after;
    let source = null;
    let retry = null;
    const open = () => {
      const params = new URLSearchParams(query || {});
      if (cursor !== undefined && cursor !== null) params.set("after", String(cursor));
      source = new EventSource(`/v1/events/stream?${params}`);
      setLive("connecting", "Connecting…");
      source.onopen = () => setLive("connected", "Live: connected");
      source.onerror = () => {
        setLive("reconnecting", "Reconnecting…");
        if (source.readyState === EventSource.CLOSED) {  // refused: the browser gave up
          source.close();
          clearTimeout(retry);
          retry = setTimeout(open, 2000);
        }
      };
      const handle = (message) => {
        if (message.lastEventId) cursor = Number(message.lastEventId);
        let data = {};
        try { data = JSON.parse(message.data); } catch (_) { /* keep-alive */ }
        onEvent(message.type, data);
      };
      for (const type of EVENT_TYPES) source.addEventListener(type, handle);
    };
    open();
    return {
      pause() { clearTimeout(retry); if (source) source.close(); setLive("paused", "Paused"); },
      resume() { open(); },
      get cursor() { return cursor; },
    };
  }
  function throttle(fn, ms) {
    let timer = null;
    let last = 0;
    return () => {
      if (timer) return;
      timer = setTimeout(async () => {
        timer = null;
        last = Date.now();
        try { await fn(); } catch (error) { report(error); }
      }, Math.max(0, last + ms - Date.now()));
    };
  }

  // ---- overview -----------------------------------------------------------------------
  const LINK_STATES = ["open", "connecting", "backoff", "error", "throttled"];
  function countRows(tbody, counts, always) {
    clear(tbody);
    const names = [...new Set([...(always || []), ...Object.keys(counts)])];
    for (const name of names) {
      tbody.append(el("tr", {}, el("td", {}, stateTag(name)), el("td", { class: "num", text: counts[name] || 0 })));
    }
  }
  function chart(box, perMinute) {
    const ns = "http://www.w3.org/2000/svg";
    const peak = Math.max(1, ...perMinute);
    const total = perMinute.reduce((a, b) => a + b, 0);
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 600 110");
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    const label = `${total} revisions in the last hour; busiest minute ${Math.max(...perMinute, 0)}; last minute ${perMinute[perMinute.length - 1] || 0}`;
    svg.setAttribute("aria-label", label);
    const title = document.createElementNS(ns, "title");
    title.textContent = label;
    svg.append(title);
    const base = document.createElementNS(ns, "line");
    for (const [k, v] of Object.entries({ x1: 0, x2: 600, y1: 105, y2: 105 })) base.setAttribute(k, v);
    svg.append(base);
    perMinute.forEach((count, i) => {
      const h = (count / peak) * 100;
      const rect = document.createElementNS(ns, "rect");
      for (const [k, v] of Object.entries({ x: i * 10 + 1, y: 105 - h, width: 8, height: h })) rect.setAttribute(k, v);
      svg.append(rect);
    });
    clear(box).append(svg);
    $("chart-summary").textContent = `${label}. Oldest minute on the left.`;
  }
  async function overview() {
    const recent = $("recent");
    const load = async () => {
      const o = await api("GET", "/v1/overview");
      $("links-total").textContent = o.links.total;
      countRows($("links-by-state").tBodies[0], o.links.byState, LINK_STATES);
      $("subs-total").textContent = o.subscriptions.total;
      countRows($("subs-by-state").tBodies[0], o.subscriptions.byState);
      chart($("chart"), o.revisionsPerMinute);
      const storage = clear($("storage"));
      fact(storage, "Backend", o.storage.backend);
      fact(storage, "Health", stateTag(o.storage.failing ? "failing" : "ok"));
      if (o.storage.error) fact(storage, "Error", o.storage.error);
      fact(storage, "Last event id", o.lastEventId);
      fact(storage, "Daemon", `version ${o.version}, up ${Math.round(o.uptimeSeconds)} s`);
      const hooks = clear($("webhook-counts"));
      fact(hooks, "Targets", `${o.webhooks.targets} (${o.webhooks.enabled} enabled)`);
      for (const [state, n] of Object.entries(o.deliveries)) fact(hooks, `Deliveries ${state}`, n);
      const trig = clear($("trigger-counts"));
      if (o.triggers) {
        fact(trig, "Triggers", `${o.triggers.total} (${o.triggers.paused} paused)`);
        for (const [state, n] of Object.entries(o.triggers.runs)) fact(trig, `Runs ${state}`, n);
      }
      const rows = clear($("replicas").tBodies[0]);
      for (const r of o.replicas) {
        rows.append(el("tr", {}, el("td", { text: r.id }), el("td", { text: `${r.host}, ${r.pid}` }),
          el("td", { text: ago(r.heartbeatAt) }), el("td", { class: "num", text: r.links }),
          el("td", {}, stateTag(r.stopping ? "stopping" : "running"))));
      }
      if (!o.replicas.length) rows.append(el("tr", {}, el("td", { colspan: 5, text: "One daemon, no leases (SQLite)." })));
      return o;
    };
    const shown = new Set();
    const addRecent = (event) => {
      if (shown.has(event.id)) return;
      shown.add(event.id);
      const item = el("li", { "data-event": event.id }, el("a", { href: `/ui/subscriptions/${event.subscriptionId}` }, breakable(event.uri)),
        ` revision ${event.revision} on `, breakable(event.serverUrl), ` at ${time(event.createdAt)}`);
      const later = [...recent.children].find((li) => Number(li.dataset.event) < event.id);
      recent.insertBefore(item, later || null);
      while (recent.children.length > 10) recent.lastChild.remove();
      $("recent-empty").hidden = true;
    };
    const first = await load();
    // The latest changes come from the log first, then from the live stream (the two may
    // overlap: an event is shown once, by its id).
    const stored = await api("GET", `/v1/events?type=resource.updated&limit=10&before=${NEWEST}`);
    for (const event of stored.events) addRecent(event);
    if (!stored.events.length) $("recent-empty").textContent = "No change stored yet. Changes appear here as they happen.";
    const refresh = throttle(load, 500);
    live({}, (type, event) => {
      if (type === "resource.updated" && event.id) addRecent(event);
      refresh();
    }, first.lastEventId);
  }

  // ---- links and subscriptions ----------------------------------------------------------
  function formValues(form) {
    const out = {};
    for (const [k, v] of new FormData(form)) if (String(v).trim()) out[k] = String(v).trim();
    return out;
  }
  async function links() {
    const form = $("filters");
    const params = new URLSearchParams(location.search);
    for (const input of form.elements) if (input.name && params.has(input.name)) input.value = params.get(input.name);
    let linkAfter = 0;
    let subAfter = 0;
    const linkRow = (l) => el("tr", {},
      el("td", {}, breakable(l.url)), el("td", {}, stateTag(l.state)),
      el("td", { class: "num", text: `${l.honoredCount}/${l.uriCount}` }),
      el("td", { class: "num", text: l.reconnects }),
      el("td", {}, l.lastErrorCode ? el("span", {}, el("strong", { text: l.lastErrorCode }), " ", l.lastError || "",
        l.lastErrorHint ? el("span", { class: "hint" }, " Hint: ", l.lastErrorHint) : null) : "–"),
      el("td", {}, el("button", { type: "button", onclick: (e) => act(e.currentTarget, async () => {
        await api("POST", `/v1/resubscribe?${new URLSearchParams({ url: l.url })}`);
        notice(`Reconnecting ${l.url} now.`, true);
      }) }, "Reconnect now")));
    const subRow = (s) => el("tr", {},
      el("td", {}, el("a", { href: `/ui/subscriptions/${s.id}` }, breakable(s.uri))),
      el("td", {}, breakable(s.serverUrl)), el("td", {}, stateTag(s.state)),
      el("td", { class: "num", text: s.revision }), el("td", { text: ago(s.lastReadAt) }));
    const loadLinks = async (more) => {
      const f = formValues(form);
      const q = new URLSearchParams({ limit: "100", after: String(more ? linkAfter : 0) });
      if (f.server) q.set("server", f.server);
      if (f.linkState) q.set("state", f.linkState);
      const answer = await api("GET", `/v1/links?${q}`);
      const body = $("links").tBodies[0];
      if (!more) clear(body);
      for (const l of answer.links) body.append(linkRow(l));
      linkAfter = answer.nextAfter;
      $("links-more").hidden = answer.links.length < 100;
    };
    const loadSubs = async (more) => {
      const f = formValues(form);
      const q = new URLSearchParams({ limit: "100", after: String(more ? subAfter : 0) });
      for (const key of ["server", "pattern", "state"]) if (f[key]) q.set(key, f[key]);
      const answer = await api("GET", `/v1/subscriptions?${q}`);
      const body = $("subscriptions").tBodies[0];
      if (!more) clear(body);
      for (const s of answer.subscriptions) body.append(subRow(s));
      subAfter = answer.nextAfter;
      $("subs-more").hidden = answer.subscriptions.length < 100;
    };
    const loadAll = async () => { await Promise.all([loadLinks(false), loadSubs(false)]); };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      history.replaceState(null, "", `?${new URLSearchParams(formValues(form))}`);
      loadAll().catch(report);
    });
    $("links-more").addEventListener("click", () => loadLinks(true).catch(report));
    $("subs-more").addEventListener("click", () => loadSubs(true).catch(report));
    $("subscribe").addEventListener("submit", (e) => {
      e.preventDefault();
      const button = e.currentTarget.querySelector("button");
      act(button, async () => {
        const f = formValues(e.currentTarget);
        const sub = await api("POST", "/v1/subscriptions", { url: f.url, uri: f.uri });
        location.assign(`/ui/subscriptions/${sub.id}`);
      });
    });
    await loadAll();
    const overviewNow = await api("GET", `/v1/events?limit=1&before=${NEWEST}`);
    const refresh = throttle(loadAll, 1000);
    live({}, () => refresh(), overviewNow.nextAfter);
  }

  // ---- one subscription -------------------------------------------------------------------
  async function subscription() {
    const id = Number(location.pathname.split("/").pop());
    let sub = null;
    const errors = $("errors");
    const showSummary = async () => {
      try {
        sub = await api("GET", `/v1/subscriptions/${id}`);
      } catch (error) {
        if (error.status === 404 && sub) {
          notice("This subscription was removed. Subscribe again to watch the resource once more.", true);
          $("unsubscribe").hidden = true;
          $("resubscribe").hidden = true;
          $("subscribe-again").hidden = false;
          return;
        }
        throw error;
      }
      clear($("title")).append(breakable(sub.uri));
      document.title = `${visible(sub.uri)} · mcpsubd`;
      const list = clear($("summary"));
      fact(list, "URI", breakable(sub.uri));
      fact(list, "Server", breakable(sub.serverUrl));
      fact(list, "State", stateTag(sub.state));
      if (sub.stateReason) fact(list, "Reason", sub.stateReason);
      fact(list, "Revision", sub.revision);
      fact(list, "Last read", `${time(sub.lastReadAt)} (${ago(sub.lastReadAt)})`);
      if (sub.link) fact(list, "Link", el("span", {}, stateTag(sub.link.state), ` generation ${sub.link.generation}, ${sub.link.reconnects} reconnects`));
      clear(errors);
      const code = sub.stateCode || (sub.link && sub.link.state !== "open" ? sub.link.lastErrorCode : null);
      if (code) {
        const message = sub.stateReason || (sub.link && sub.link.lastError) || "";
        errors.append(el("li", {}, el("strong", { text: code }), ` ${message}`, sub.hint ? el("div", { class: "hint" }, "Hint: ", sub.hint) : null));
      } else errors.append(el("li", { class: "muted", text: "No error now." }));
    };
    // What the Content and Diff panes show: the newest revision and the change that made it,
    // following each new revision, until the person picks a revision (Show, From/To).
    let pinned = null;        // the revision the person chose to see, or null: the newest
    let picked = null;        // {from, to} the person chose to compare, or null: the newest two
    let newest = 0;
    const revisionRow = (r) => el("tr", {},
      el("td", { text: `#${r.revision}` }), el("td", { text: time(r.readAt) }),
      el("td", { class: "num", text: bytes(r.size) }), el("td", {}, el("code", { text: r.contentHash.slice(0, 12) })),
      el("td", {}, el("input", { type: "radio", name: "from", value: r.revision, "aria-label": `compare from revision ${r.revision}` })),
      el("td", {}, el("input", { type: "radio", name: "to", value: r.revision, "aria-label": `compare to revision ${r.revision}` })),
      el("td", {}, el("button", { type: "button", onclick: () => { pinned = r.revision; showRevision(r.revision).catch(report); } }, `Show #${r.revision}`)));
    const check = (name, revision) => {
      const input = $("revisions").querySelector(`input[name="${name}"][value="${revision}"]`);
      if (input) input.checked = true;
    };
    const pair = () => picked || (newest >= 2 ? { from: newest - 1, to: newest } : null);
    const showRevisions = async () => {
      const answer = await api("GET", `/v1/subscriptions/${id}/revisions?limit=100`);
      const body = clear($("revisions").tBodies[0]);
      for (const r of answer.revisions) body.append(revisionRow(r));
      if (!answer.revisions.length) body.append(el("tr", {}, el("td", { colspan: 7, text: "Not read yet." })));
      newest = answer.revisions.length ? answer.revisions[0].revision : 0;
      const chosen = pair();
      if (chosen) { check("from", chosen.from); check("to", chosen.to); }
    };
    const followButton = (what) => el("button", { type: "button", class: "quiet", onclick: () => {
      if (what === "content") pinned = null;
      else { picked = null; diffShown = null; }
      showPanes().catch(report);
    } }, "Follow the newest");
    let onShow = null;        // the revision in the Content pane (fetched again only if another)
    const showRevision = async (number) => {
      const r = onShow && onShow.revision === number ? onShow : await api("GET", `/v1/subscriptions/${id}/revisions/${number}`);
      onShow = r;
      const label = clear($("content-label"));
      label.append(`Revision ${r.revision}, read ${time(r.readAt)}`);
      if (pinned === null) label.append(" (the newest; a new revision shows here as it arrives)");
      else label.append(` (picked; the newest is ${newest}) `, followButton("content"));
      $("content").textContent = r.text !== null ? r.text : JSON.stringify(r.contents, null, 1);
    };
    let diffShown = null;     // "from-to" of the pair in the Diff pane
    const showDiff = async (from, to) => {
      const d = await api("GET", `/v1/subscriptions/${id}/diff?from=${from}&to=${to}`);
      diffShown = `${from}-${to}`;
      const label = clear($("diff-label"));
      label.append(`Revision ${d.from} → revision ${d.to}${d.truncated ? " (cut short)" : ""}. Lines starting with − were removed, + were added.`);
      if (picked !== null) label.append(" ", followButton("diff"));
      const out = clear($("diff"));
      // One block per line and no newline characters: a newline between two blocks is drawn
      // as an empty line of its own (copying the blocks still gives one line each).
      for (const line of d.lines) {
        const kind = line.startsWith("@@") ? "hunk" : line.startsWith("+") && !line.startsWith("+++") ? "add" : line.startsWith("-") && !line.startsWith("---") ? "del" : "same";
        out.append(el("span", { class: kind }, line));
      }
      if (!d.lines.length) out.textContent = "The two revisions have the same text.";
    };
    const showPanes = async () => {
      if (newest) await showRevision(pinned === null ? newest : pinned);
      const chosen = pair();
      if (!chosen) return;
      check("from", chosen.from);
      check("to", chosen.to);
      if (diffShown !== `${chosen.from}-${chosen.to}`) await showDiff(chosen.from, chosen.to);
    };
    const eventRow = (e) => el("tr", {}, el("td", { class: "num", text: e.id }), el("td", { text: time(e.createdAt) }),
      el("td", { text: e.type }), el("td", { text: describe(e) }));
    const events = $("events").tBodies[0];
    const compare = (form, asked) => {
      const f = new FormData(form);
      if (!f.get("from") || !f.get("to")) { if (asked) notice("Pick a From and a To revision."); return; }
      picked = { from: Number(f.get("from")), to: Number(f.get("to")) };
      showDiff(picked.from, picked.to).catch(report);
    };
    $("diff-form").addEventListener("submit", (e) => { e.preventDefault(); compare(e.currentTarget, true); });
    $("diff-form").addEventListener("change", (e) => compare(e.currentTarget, false));
    $("resubscribe").addEventListener("click", (e) => act(e.currentTarget, async () => {
      await api("POST", `/v1/resubscribe?${new URLSearchParams({ url: sub.serverUrl })}`);
      notice("The link reconnects now and reads the resource again.", true);
    }));
    $("unsubscribe").addEventListener("click", (e) => act(e.currentTarget, async () => {
      if (!confirm(`Stop watching ${visible(sub.uri)}?`)) return;
      await api("DELETE", `/v1/subscriptions/${id}`);
      await showSummary();
    }));
    $("subscribe-again").addEventListener("click", (e) => act(e.currentTarget, async () => {
      const again = await api("POST", "/v1/subscriptions", { url: sub.serverUrl, uri: sub.uri });
      location.assign(`/ui/subscriptions/${again.id}`);
    }));
    await showSummary();
    await showRevisions();
    await showPanes();
    const tail = await api("GET", `/v1/events?subscription=${id}&limit=50&before=${NEWEST}`);
    for (const e of tail.events.reverse()) events.append(eventRow(e));
    const refresh = throttle(async () => { await showSummary(); await showRevisions(); await showPanes(); }, 300);
    live({ uri: sub.uri }, (type, event) => {
      if (event.subscriptionId !== id && type !== "reset") return;
      if (event.id) events.prepend(eventRow(event));
      if (type === "resource.updated" && event.revision) {
        // Shown at once from the event; the refresh below fills in its size.
        const body = $("revisions").tBodies[0];
        if (!body.querySelector(`input[name="to"][value="${event.revision}"]`)) {
          body.prepend(revisionRow({ revision: event.revision, readAt: event.createdAt, size: 0,
            contentHash: String((event.data || {}).contentHash || "") }));
        }
      }
      refresh();
    }, tail.nextAfter);
  }

  // ---- events: a live tail with filters, pausable, resuming from its cursor -----------------
  async function eventsPage() {
    const form = $("filters");
    const body = $("events").tBodies[0];
    const params = new URLSearchParams(location.search);
    for (const input of form.elements) if (input.name && params.has(input.name)) input.value = params.get(input.name);
    let stream = null;
    let paused = false;
    const row = (e) => el("tr", {}, el("td", { class: "num", text: e.id }), el("td", { text: time(e.createdAt) }),
      el("td", { text: e.type }),
      el("td", {}, e.subscriptionId ? el("a", { href: `/ui/subscriptions/${e.subscriptionId}` }, breakable(e.uri || "")) : (e.uri ? breakable(e.uri) : "–")),
      el("td", { text: describe(e) }));
    const start = async () => {
      const f = formValues(form);
      const q = new URLSearchParams({ limit: "100", before: NEWEST });
      if (f.type) q.set("type", f.type);
      if (f.uri) q.set("uri", f.uri);
      const tail = await api("GET", `/v1/events?${q}`);
      clear(body);
      for (const e of tail.events.reverse()) body.append(row(e));
      const query = {};
      if (f.type) query.type = f.type;
      if (f.uri) query.uri = f.uri;
      if (stream) stream.pause();
      stream = live(query, (type, e) => {
        if (!e.id) return;
        body.prepend(row(e));
        while (body.children.length > 500) body.lastChild.remove();
        $("tail-status").textContent = `Following from event ${e.id}.`;
      }, tail.nextAfter);
      paused = false;
      $("pause").textContent = "Pause";
      $("pause").setAttribute("aria-pressed", "false");
    };
    form.addEventListener("submit", (e) => {
      e.preventDefault();
      history.replaceState(null, "", `?${new URLSearchParams(formValues(form))}`);
      start().catch(report);
    });
    $("pause").addEventListener("click", () => {
      if (!stream) return;
      paused = !paused;
      if (paused) {
        stream.pause();
        $("tail-status").textContent = `Paused after event ${stream.cursor}; resuming picks up from there.`;
      } else stream.resume();
      $("pause").textContent = paused ? "Resume" : "Pause";
      $("pause").setAttribute("aria-pressed", String(paused));
    });
    await start();
  }

  // ---- webhooks -------------------------------------------------------------------------------
  async function webhooks() {
    const form = $("filters");
    const targetsBody = $("targets").tBodies[0];
    const deliveriesBody = $("deliveries").tBodies[0];
    let shown = null;  // the delivery whose attempts are on show: refreshed with the list
    let targets = new Map();  // id → target, for its mode and counts
    // A (target, URI) pair is one queue: only its oldest open delivery is sent, so the ones
    // behind a failed head wait (in order: the mode "all" sends every revision). Which one
    // a pending delivery waits for, when the page shows it, else null.
    const heldBehind = (d, list) => {
      if (d.state !== "pending" || d.attempts) return null;
      let head = null;
      for (const other of list) {
        if (other.targetId === d.targetId && other.uri === d.uri && other.id < d.id
          && (other.state === "pending" || other.state === "failed") && (!head || other.id < head.id)) head = other;
      }
      if (head) return head.state === "failed" || head.attempts ? head : null;
      const t = targets.get(d.targetId);
      const due = d.nextAttemptAt && d.nextAttemptAt * 1000 < Date.now() - 2000;
      return due && t && (t.deliveries || {}).failed ? { id: null, state: "failed" } : null;
    };
    const showSecret = (text) => { const box = $("secret-box"); box.hidden = false; box.textContent = text; };
    const targetRow = (t) => {
      const d = t.deliveries || {};
      const done = (d.delivered || 0) + (d.dead || 0) + (d.failed || 0);
      const waiting = d.pending || 0;
      const rate = `${done ? `${d.delivered || 0} of ${done} delivered` : "none tried yet"}${waiting ? `, ${waiting} waiting` : ""}`;
      const health = !t.enabled ? "disabled" : t.consecutiveFailures ? "failing" : "healthy";
      const actions = el("div", { class: "actions" },
        el("button", { type: "button", onclick: (e) => act(e.currentTarget, async () => {
          const r = await api("POST", `/v1/webhooks/${t.id}/test`);
          notice(r.ok ? `Test ping to target ${t.id}: answered ${r.status} in ${r.elapsedMs} ms.` : `Test ping to target ${t.id} failed: ${r.status || ""} ${r.error || ""}`, r.ok);
        }), "aria-label": `Send a test to target ${t.id}` }, "Send test"),
        el("button", { type: "button", onclick: (e) => act(e.currentTarget, async () => {
          if (!confirm(`Rotate the secret of target ${t.id}? The old one keeps signing for 24 hours.`)) return;
          const r = await api("POST", `/v1/webhooks/${t.id}/rotate-secret`, {});
          showSecret(`New secret of target ${t.id} (shown once): ${r.secret}`);
        }), "aria-label": `Rotate the secret of target ${t.id}` }, "Rotate secret"),
        el("button", { type: "button", onclick: (e) => act(e.currentTarget, async () => {
          await api("POST", `/v1/webhooks/${t.id}/${t.enabled ? "disable" : "enable"}`);
          await loadTargets();
        }) }, t.enabled ? "Disable" : "Enable"));
      return el("tr", {}, el("td", { class: "num", text: t.id }), el("td", {}, breakable(t.url), el("div", { class: "hint", text: `mode ${t.mode}` })),
        el("td", {}, stateTag(health), t.disabledReason ? el("div", { class: "hint", text: t.disabledReason }) : null),
        el("td", { text: rate }),
        el("td", { text: t.consecutiveFailures ? `${t.consecutiveFailures} failures in a row since ${time(t.failingSince)}` : t.lastSuccessAt ? `last success ${ago(t.lastSuccessAt)}` : "–" }),
        el("td", {}, actions));
    };
    const loadTargets = async () => {
      const list = await api("GET", "/v1/webhooks");
      const detailed = await Promise.all(list.webhooks.map((t) => api("GET", `/v1/webhooks/${t.id}`)));
      clear(targetsBody);
      targets = new Map(detailed.map((t) => [t.id, t]));
      for (const t of detailed) targetsBody.append(targetRow(t));
      if (!detailed.length) targetsBody.append(el("tr", {}, el("td", { colspan: 6, text: "No webhook targets yet." })));
    };
    const showAttempts = async (delivery) => {
      const box = clear($("attempts"));
      let answer;
      try {
        answer = await api("GET", `/v1/deliveries/${delivery.id}/attempts`);
      } catch (error) { report(error); return; }
      $("attempts-label").textContent = `Delivery ${delivery.id} (${delivery.webhookId}) to target ${delivery.targetId}, ${answer.state}: ${answer.attempts.length} attempts logged`;
      if (!answer.attempts.length) box.append(el("p", { class: "muted", text: "No attempt yet." }));
      for (const a of answer.attempts) {
        const headers = Object.entries(a.requestHeaders || {}).map(([k, v]) => `${k}: ${v}`).join("\n");
        box.append(el("article", { class: "attempt", "aria-label": `attempt ${a.attempt}` },
          el("h3", { text: `Attempt ${a.attempt} at ${time(a.startedAt)}: ${a.ok ? "delivered" : "failed"}${a.status ? `, HTTP ${a.status}` : ""}${a.error ? `, ${a.error}` : ""}${a.durationMs !== null ? ` (${a.durationMs} ms)` : ""}` }),
          el("h4", { text: "Request headers" }), el("pre", { class: "text", text: headers }),
          el("h4", { text: "Request body" }), el("pre", { class: "text", text: answer.requestBody || "" }),
          el("h4", { text: "Response" }), el("pre", { class: "text", text: `${a.status ? `HTTP ${a.status}\n` : ""}${a.responseBody || ""}` })));
      }
    };
    const deliveryRow = (d, held) => el("tr", {}, el("td", { class: "num", text: d.id }), el("td", { class: "num", text: d.targetId }),
      el("td", {}, breakable(d.uri)),
      el("td", {}, stateTag(d.state), held ? el("div", { class: "hint", text: held.id ? `waits for delivery ${held.id} (${held.state})` : "waits for an earlier failed delivery of this URI" }) : null),
      el("td", { class: "num", text: d.attempts }),
      el("td", { text: d.lastStatus ? `HTTP ${d.lastStatus}` : d.lastError || "–" }), el("td", { text: time(d.createdAt) }),
      el("td", {}, el("div", { class: "actions" },
        el("button", { type: "button", "aria-label": `Attempts of delivery ${d.id}`, onclick: () => { shown = d; showAttempts(d); } }, "Attempts"),
        el("button", { type: "button", "aria-label": `Retry delivery ${d.id}`, onclick: (e) => act(e.currentTarget, async () => {
          await api("POST", `/v1/deliveries/${d.id}/retry`);
          notice(`Delivery ${d.id} goes out again now.`, true);
          await loadDeliveries();
        }) }, "Retry"))));
    // One paragraph over the table: why pending deliveries are not sent, and what to do.
    const explainHeld = (waiting, held) => {
      const box = $("held-note");
      box.hidden = !waiting.length;
      if (!waiting.length) { box.textContent = ""; return; }
      const heads = [...new Set(waiting.map((d) => held.get(d.id).id).filter(Boolean))];
      const modes = [...new Set(waiting.map((d) => (targets.get(d.targetId) || {}).mode || "all"))];
      const n = waiting.length;
      box.textContent = `${n} pending ${n === 1 ? "delivery waits" : "deliveries wait"} behind a failed one`
        + `${heads.length ? ` (delivery ${heads.join(", ")})` : ""}. A target sends each URI's deliveries one at a time, oldest first`
        + `${modes.includes("all") ? " (mode all: every revision, in order)" : ""}, so the next goes out once the failed one is delivered or dead.`
        + " Fix the receiver and press Retry on the failed delivery (or wait for its next scheduled attempt): the waiting ones follow.";
    };
    const loadDeliveries = async () => {
      const f = formValues(form);
      const q = new URLSearchParams({ limit: "100", newest: "true" });
      if (f.target) q.set("target", f.target);
      if (f.state) q.set("state", f.state);
      if (f.since) q.set("since", String(new Date(f.since).getTime() / 1000));
      const answer = await api("GET", `/v1/deliveries?${q}`);
      clear(deliveriesBody);
      const held = new Map(answer.deliveries.map((d) => [d.id, heldBehind(d, answer.deliveries)]));
      for (const d of answer.deliveries) deliveriesBody.append(deliveryRow(d, held.get(d.id)));
      explainHeld(answer.deliveries.filter((d) => held.get(d.id)), held);
      if (!answer.deliveries.length) deliveriesBody.append(el("tr", {}, el("td", { colspan: 8, text: "No deliveries match." })));
      if (shown) await showAttempts(shown);
    };
    form.addEventListener("submit", (e) => { e.preventDefault(); loadDeliveries().catch(report); });
    $("recover").addEventListener("click", (e) => act(e.currentTarget, async () => {
      const f = formValues(form);
      if (!f.target || !f.since) { notice("Give a target id and a time to recover from."); return; }
      const r = await api("POST", "/v1/deliveries/recover", { target: Number(f.target), since: new Date(f.since).getTime() / 1000 });
      notice(`${r.recovered} deliveries of target ${r.targetId} go out again.`, true);
      await loadDeliveries();
    }));
    $("add-target").addEventListener("submit", (e) => {
      e.preventDefault();
      const target = e.currentTarget;
      act(target.querySelector("button"), async () => {
        const f = formValues(target);
        const body = { url: f.url };
        if (f.patterns) body.uriPatterns = f.patterns.split(",").map((p) => p.trim()).filter(Boolean);
        const created = await api("POST", "/v1/webhooks", body);
        showSecret(`Secret of target ${created.id} (shown once): ${created.secret}`);
        target.reset();
        await loadTargets();
      });
    });
    await loadTargets();
    await loadDeliveries();
    const now = await api("GET", `/v1/events?limit=1&before=${NEWEST}`);
    const refresh = throttle(async () => { await Promise.all([loadTargets(), loadDeliveries()]); }, 1000);
    live({}, () => refresh(), now.nextAfter);
    setInterval(refresh, 3000);  // delivery outcomes are not events: look again while open
  }

  // ---- triggers -------------------------------------------------------------------------------
  async function triggersPage() {
    const form = $("run-filters");
    const triggersBody = $("triggers").tBodies[0];
    const runsBody = $("runs").tBodies[0];
    let shown = null;  // the run whose attempts are on show: refreshed with the list
    const ended = (a) => (a.signal ? `signal ${a.signal}` : a.exitCode !== null && a.exitCode !== undefined ? `exit ${a.exitCode}` : "did not start");
    const runCounts = (runs) => Object.entries(runs || {}).filter(([, n]) => n).map(([s, n]) => `${s} ${n}`).join(", ") || "none yet";
    const triggerRow = (t) => {
      const last = t.lastRun;
      const actions = el("div", { class: "actions" },
        el("button", { type: "button", "aria-label": `Test trigger ${t.id}`, onclick: (e) => act(e.currentTarget, async () => {
          notice(`Running trigger ${t.id} once with a synthetic change…`, true);
          const r = await api("POST", `/v1/triggers/${t.id}/test`);
          notice(`Test of trigger ${t.id}: ${r.ok ? "succeeded" : "failed"}, ${ended(r)}${r.timedOut ? " (timed out)" : ""} in ${r.durationMs} ms${r.error ? `: ${r.error}` : ""}.`, r.ok);
        }) }, "Test"),
        el("button", { type: "button", "aria-label": `${t.enabled ? "Pause" : "Resume"} trigger ${t.id}`, onclick: (e) => act(e.currentTarget, async () => {
          await api("POST", `/v1/triggers/${t.id}/${t.enabled ? "pause" : "resume"}`);
          await loadTriggers();
        }) }, t.enabled ? "Pause" : "Resume"));
      return el("tr", {}, el("td", { class: "num", text: t.id }),
        el("td", {}, t.name ? el("div", { text: visible(t.name) }) : null,
          el("code", { class: "hint", text: visible([t.program, ...(t.args || [])].join(" ")) }),
          el("div", { class: "hint", text: `mode ${t.mode}, ${t.concurrency} at once, timeout ${t.timeoutS} s${t.env.length ? `, env ${t.env.join(" ")}` : ""}` })),
        el("td", {}, ...t.uriPatterns.map((p) => el("div", {}, breakable(p)))),
        el("td", {}, stateTag(t.enabled ? "active" : "paused")),
        el("td", { text: runCounts(t.runs) }),
        el("td", {}, last ? el("span", {}, `run ${last.id} `, stateTag(last.state), ` ${ago(last.updatedAt)}`) : "–"),
        el("td", {}, actions));
    };
    const loadTriggers = async () => {
      const list = await api("GET", "/v1/triggers");
      clear(triggersBody);
      for (const t of list.triggers) triggersBody.append(triggerRow(t));
      if (!list.triggers.length) triggersBody.append(el("tr", {}, el("td", { colspan: 7, text: "No triggers yet: add one with mcpsubctl trigger add." })));
    };
    const tail = (label, text, total) => [el("h4", { text: text ? `${label}${total > new TextEncoder().encode(text).length ? ` (last part of ${bytes(total)})` : ""}` : `${label}: empty` }),
      text ? el("pre", { class: "text", text: visible(text).replace(/\\x0a/g, "\n") }) : null];
    const showRun = async (run) => {
      const box = clear($("run-attempts"));
      let answer;
      try { answer = await api("GET", `/v1/triggers/runs/${run.id}`); } catch (error) { report(error); return; }
      $("run-label").textContent = `Run ${answer.id} of trigger ${answer.triggerId} for ${visible(answer.uri)}, ${answer.state}: ${answer.attempts.length} attempts`;
      if (!answer.attempts.length) box.append(el("p", { class: "muted", text: "No attempt yet." }));
      for (const a of answer.attempts) {
        box.append(el("article", { class: "attempt", "aria-label": `attempt ${a.attempt}` },
          el("h3", { text: `Attempt ${a.attempt} at ${time(a.startedAt)}: ${a.endedAt ? ended(a) : "running"}${a.timedOut ? " (timed out)" : ""}${a.durationMs !== null ? ` (${a.durationMs} ms)` : ""}` }),
          a.error ? el("p", { class: "hint", text: visible(a.error) }) : null,
          ...tail("stdout", a.stdoutTail, a.stdoutBytes), ...tail("stderr", a.stderrTail, a.stderrBytes)));
      }
    };
    const runRow = (r) => el("tr", {}, el("td", { class: "num", text: r.id }), el("td", { class: "num", text: r.triggerId }),
      el("td", {}, breakable(r.uri)),
      el("td", {}, stateTag(r.state), r.lastError ? el("div", { class: "hint", text: visible(r.lastError) }) : null),
      el("td", { class: "num", text: r.attempts }),
      el("td", { text: r.lastSignal || (r.lastExit !== null ? String(r.lastExit) : "–") }), el("td", { text: time(r.createdAt) }),
      el("td", {}, el("div", { class: "actions" },
        el("button", { type: "button", "aria-label": `Output of run ${r.id}`, onclick: () => { shown = r; showRun(r); } }, "Output"),
        r.state === "running" ? null : el("button", { type: "button", "aria-label": `Retry run ${r.id}`, onclick: (e) => act(e.currentTarget, async () => {
          await api("POST", `/v1/triggers/runs/${r.id}/retry`);
          notice(`Run ${r.id} runs again now.`, true);
          await loadRuns();
        }) }, "Retry"))));
    const loadRuns = async () => {
      const f = formValues(form);
      const q = new URLSearchParams({ limit: "100", newest: "true" });
      if (f.trigger) q.set("trigger", f.trigger);
      if (f.state) q.set("state", f.state);
      const answer = await api("GET", `/v1/triggers/runs?${q}`);
      clear(runsBody);
      for (const r of answer.runs) runsBody.append(runRow(r));
      if (!answer.runs.length) runsBody.append(el("tr", {}, el("td", { colspan: 8, text: "No runs match." })));
      if (shown) await showRun(shown);
    };
    form.addEventListener("submit", (e) => { e.preventDefault(); loadRuns().catch(report); });
    await loadTriggers();
    await loadRuns();
    const now = await api("GET", `/v1/events?limit=1&before=${NEWEST}`);
    const refresh = throttle(async () => { await Promise.all([loadTriggers(), loadRuns()]); }, 1000);
    live({}, () => refresh(), now.nextAfter);
    setInterval(refresh, 3000);  // run outcomes are not events: look again while open
  }

  // ---- start ----------------------------------------------------------------------------------
  for (const link of document.querySelectorAll("nav a[data-nav]")) {
    if (link.dataset.nav === page) link.setAttribute("aria-current", "page");
  }
  const logout = $("logout");
  if (logout) {
    logout.addEventListener("click", async () => {
      await fetch("/ui/logout", { method: "POST", headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" });
      location.assign("/ui/login");
    });
  }
  const pages = { overview, links, subscription, events: eventsPage, webhooks, triggers: triggersPage };
  if (pages[page]) pages[page]().catch(report);
})();
