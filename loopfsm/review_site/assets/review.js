// The review page: branches of a clicked state or arrow, and the simulator on the server's compiled machine.
"use strict";

(function () {
  const table = JSON.parse(document.getElementById("table")?.textContent || "null");
  if (!table) return;
  const live = document.body.dataset.mode === "live";
  const machine = table.machine;
  const details = document.getElementById("details");
  const el = (tag, attrs, ...kids) => {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") node.className = v; else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v);
    }
    for (const kid of kids) if (kid !== null && kid !== undefined) node.append(kid);
    return node;
  };
  const json = (v) => JSON.stringify(v);

  // -- details of a state or an arrow ---------------------------------------------------------------
  // An arrow's title is "HalfOpen:w->Open" (the box, the side its line's arrow leaves from, the target); a
  // line's arrow is named for its way ("way:HalfOpen:w3").
  function edgeEnds(g) {
    const t = g.querySelector("title")?.textContent || "";
    const [a, b] = t.split("->");
    // the target may carry the side its arrow arrives at ("AwaitingEncrypt:n"): the state is before the colon
    return [a.split(":")[0], (b || "").split(":")[0], g.id.startsWith("way:") ? g.id.split(":")[2] : null];
  }
  // The number a branch has on its state's card (the order the state tries the feed's ways), when it has one:
  // the list numbered every branch of the state 1, 2, 3..., and "approved" was 3 on the card and 5 in the list.
  const places = {};
  for (const ways of Object.values(table.ways)) for (const w of ways) if (w.place !== null) places[w.branch] = w.place;
  function branchItem(b) {
    const where = b.refuse !== null ? "refused: " + b.refuse : b.to === null ? "stays" : "to " + b.to;
    const place = b.name in places ? el("span", { class: "place" }, String(places[b.name])) : null;
    return el("li", {}, place,
      el("code", {}, b.name), " ", el("strong", {}, b.feed), b.when.length ? " if " + b.when.join(" and ") : "",
      ": ", where, b.actions.length ? " / " + b.actions.join(", ") : "",
      b.description ? el("div", { class: "why" }, b.description) : null,
      el("a", { href: "../source/" + machine + ".html#L" + b.line }, (b.shared ? "first: " : "") + "line " + b.line));
  }
  function show(title, branches, note) {
    if (!details) return;
    details.replaceChildren(el("h2", {}, title));
    if (note) details.append(el("p", {}, note));
    if (!branches.length) { details.append(el("p", {}, "No branch.")); return; }
    details.append(el("ol", { class: "branches" }, ...branches.map(branchItem)));
  }
  function showState(name) {
    const s = table.states[name];
    if (!s) return;
    show(name + (s.terminal ? " (final)" : ""), table.branches[name] || [], s.description);
  }
  // The branches an arrow is drawn for, and no other: a line's arrow its way's, a box's arrow the ways of its
  // card that reach the target, a note's arrow the branches of the feeds it stands for.
  function showEdge(a, b, port) {
    if (a === "__start__") {
      show("start \u2192 " + b, [], "A new run starts in " + b + ".");
      return;
    }
    const byName = (names) => (table.branches[a] || []).filter((x) => names.includes(x.name));
    if (!(a in table.states)) {
      const feeds = table.notes[a] || [];
      const all = Object.values(table.branches).flat().filter((x) => x.to === b
        && (feeds.includes(x.feed) || (feeds.includes("any feed") && x.shared)));
      const seen = new Set();
      const once = all.filter((x) => !seen.has(x.name) && seen.add(x.name));
      show("from several states into " + b, once, "The note stands for several states that take these feeds alike.");
      return;
    }
    const ways = (table.ways[a] || []).filter((w) => (port ? w.port === port : w.to === b));
    show(a + " \u2192 " + b, byName(ways.map((w) => w.branch)), null);
  }
  for (const g of document.querySelectorAll("figure.diagram g.node, figure.diagram g.edge")) {
    const isNode = g.classList.contains("node");
    const title = g.querySelector("title")?.textContent || "";
    if (isNode && !(title in table.states)) continue;
    g.setAttribute("tabindex", "0");
    g.setAttribute("role", "button");
    g.setAttribute("aria-label", isNode ? "state " + title : "arrow " + edgeEnds(g).slice(0, 2).join(" to "));
    const act = () => (isNode ? showState(title) : showEdge(...edgeEnds(g)));
    g.addEventListener("click", act);
    g.addEventListener("keydown", (e) => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); act(); } });
  }

  // -- a diff page: the new table's added and changed arrows marked on its diagram --------------------
  const diff = JSON.parse(document.getElementById("diff")?.textContent || "null");
  if (diff) {
    const key = (a, b) => a + "->" + b;
    const added = new Set(diff.added.map(([a, b]) => key(a, b)));
    const changed = new Set(diff.changed.map(([a, b]) => key(a, b)));
    for (const g of document.querySelectorAll("figure.diagram g.edge")) {
      const [a, b] = edgeEnds(g);
      if (added.has(key(a, b))) g.classList.add("added");
      else if (changed.has(key(a, b))) g.classList.add("changed");
    }
  }

  if (!live) return;

  // -- the simulator ---------------------------------------------------------------------------------
  const api = (path) => "../api/" + encodeURIComponent(machine) + "/" + path;
  const status = document.getElementById("sim-status");
  const controls = document.getElementById("sim-controls");
  const feeds = document.getElementById("sim-feeds");
  const steps = document.getElementById("sim-steps");

  async function call(path, options) {
    const response = await fetch(api(path), options);
    const body = await response.json();
    if (!response.ok) throw new Error(body.error || response.statusText);
    return body;
  }
  function say(text, bad) {
    status.replaceChildren(el("p", { class: bad ? "error" : "ok" }, text));
  }
  function highlight(state) {
    for (const g of document.querySelectorAll("figure.diagram g.node")) {
      const t = g.querySelector("title")?.textContent || "";
      g.classList.toggle("current", t === state);
    }
  }
  function input(feed, arg) {
    const id = "arg-" + feed + "-" + arg.name;
    let field;
    const choices = arg.enum || (arg.type === "boolean" && !arg.list ? [true, false] : null);
    if (choices && !arg.list) {
      field = el("select", { id, name: arg.name, "data-kind": "choice" },
        ...(arg.nullable ? [null] : []).concat(choices).map((c) => el("option", { value: json(c) }, c === null ? "null" : String(c))));
      if (!arg.required) field.value = json(arg.default);
    } else if ((arg.type === "integer" || arg.type === "number") && !arg.list) {
      field = el("input", { id, name: arg.name, type: "text", inputmode: "numeric", "data-kind": arg.type });
      if (!arg.required && arg.default !== null) field.value = String(arg.default);
    } else if (arg.type === "string" && !arg.list) {
      field = el("input", { id, name: arg.name, type: "text", "data-kind": "string" });
      if (!arg.required && arg.default !== null) field.value = arg.default;
    } else {
      field = el("textarea", { id, name: arg.name, rows: "2", "data-kind": "json" });
      field.value = arg.required ? "" : json(arg.default);
    }
    if (!arg.required && arg.nullable) field.dataset.nullable = "1";
    const hint = arg.type + (arg.list ? " list" : "") + (arg.nullable ? ", may be null" : "") + (arg.required ? ", required" : "");
    return el("label", { for: id }, el("span", { class: "arg" }, arg.name), field, el("small", {}, hint));
  }
  function value(field) {
    const text = field.value;
    switch (field.dataset.kind) {
      case "choice": return JSON.parse(text);
      case "integer": case "number": {
        if (text.trim() === "" && field.dataset.nullable) return null;
        const n = Number(text);
        return text.trim() === "" || Number.isNaN(n) ? text : n;
      }
      case "string": return text === "" && field.dataset.nullable ? null : text;
      default:
        if (text.trim() === "") return null;
        try { return JSON.parse(text); } catch { return text; }
    }
  }
  function render(view) {
    highlight(view.state);
    const facts = el("dl", { class: "facts" },
      el("dt", {}, "state"), el("dd", {}, el("strong", { id: "sim-state" }, view.state), view.terminal ? " (final)" : ""),
      el("dt", {}, "state data"), el("dd", {}, el("code", {}, json(view.state_data))),
      el("dt", {}, "data"), el("dd", {}, el("code", { id: "sim-data" }, json(view.data))),
      el("dt", {}, "policy"), el("dd", {}, el("code", {}, json(view.policy))));
    controls.replaceChildren(facts,
      el("div", { class: "buttons" },
        el("button", { type: "button", onclick: () => run("new", { method: "POST", body: "{}" }) }, "New run"),
        el("button", { type: "button", id: "sim-back", onclick: () => run("back", { method: "POST" }) }, "Step back"),
        el("a", { href: api("snapshot.json"), download: machine + ".snapshot.json" }, "Download snapshot"),
        el("a", { href: api("trace.yaml"), download: machine + ".trace.yaml" }, "Download trace"),
        el("label", { class: "file" }, "Start from a snapshot ",
          el("input", { type: "file", id: "sim-snapshot", accept: ".json,application/json", onchange: loadSnapshot })),
        el("label", { class: "file" }, "Step through a trace file ",
          el("input", { type: "file", id: "sim-trace", accept: ".yaml,.yml,.trace", onchange: loadTrace }))),
      el("div", { class: "buttons" }, view.pending.length ?
        el("button", { type: "button", id: "sim-next", onclick: () => run("next", { method: "POST" }) },
          "Next step of the trace: " + view.pending[0].feed + " (" + view.pending_count + " left)") : null));
    const policyForm = el("form", { class: "feed", id: "sim-policy" }, el("h4", {}, "Policy of a new run"),
      ...Object.entries(view.policy).map(([k, v]) => el("label", { for: "policy-" + k },
        el("span", { class: "arg" }, k), el("input", { id: "policy-" + k, name: k, type: "text", value: json(v) }))),
      el("button", { type: "submit" }, "New run under this policy"));
    policyForm.addEventListener("submit", (e) => {
      e.preventDefault();
      const policy = {};
      for (const field of policyForm.querySelectorAll("[name]")) {
        try { policy[field.name] = JSON.parse(field.value); } catch { policy[field.name] = field.value; }
      }
      run("new", { method: "POST", body: json({ policy }) });
    });
    if (Object.keys(view.policy).length) controls.append(policyForm);
    feeds.replaceChildren(el("h3", {}, "Feeds in " + view.state),
      ...view.feeds.filter((f) => f.allowed).map((f) => {
        const form = el("form", { class: "feed", "data-feed": f.name },
          el("h4", {}, f.name), el("p", { class: "why" }, f.description), ...f.args.map((a) => input(f.name, a)),
          el("button", { type: "submit" }, "Feed " + f.name));
        form.addEventListener("submit", (e) => {
          e.preventDefault();
          const args = {};
          for (const field of form.querySelectorAll("[name]")) args[field.name] = value(field);
          run("feed", { method: "POST", body: json({ feed: f.name, args }) });
        });
        return form;
      }),
      el("p", { class: "hint" }, "Not taken in this state: " + (view.feeds.filter((f) => !f.allowed).map((f) => f.name).join(", ") || "none")));
    if (view.earlier) steps.setAttribute("start", String(view.earlier + 1)); else steps.removeAttribute("start");
    steps.replaceChildren(...view.steps.map((s) => el("li", { class: s.error ? "refused" : "taken" },
      el("code", {}, s.feed + "(" + Object.entries(s.args).map(([k, v]) => k + "=" + json(v)).join(", ") + ")"), " ",
      s.error ? el("span", { class: "error" }, s.error) : (s.from + " \u2192 " + s.to + " by " + s.branch),
      ...(s.broken || []).map((b) => el("div", { class: "error broken" }, "invariant " + b)),
      s.asked && s.asked.length ? el("ul", { class: "why asked", "aria-label": "guards asked" },
        ...s.asked.map((a) => el("li", {}, el("code", {}, a.branch), a.held ? " taken" : " passed over",
          a.guards.length ? ": " + a.guards.map((g) => g.guard + (g.held ? " holds" : " does not hold")).join(", ") : ": no guard"))) : null,
      s.returned ? el("div", { class: "why" }, "returned " + s.returned) : null,
      s.record ? el("div", { class: "record" }, el("code", {}, json(s.record))) : null)));
  }
  async function run(path, options) {
    try {
      const body = await call(path, { headers: { "Content-Type": "application/json" }, ...options });
      const view = body.view || body;
      render(view);
      if (body.outcome) {
        const o = body.outcome;
        const moved = o.feed + ": " + o.from + " \u2192 " + o.to + " by " + o.branch;
        if (o.broken.length) say(moved + "; violates invariant " + o.broken.join("; "), true);
        else say(o.error ? o.feed + " refused: " + o.error : moved, !!o.error);
        if (o.branch) { const b = (table.branches[o.from] || []).find((x) => x.name === o.branch); if (b) show("Taken: " + o.branch, [b], null); }
      } else say("State: " + view.state, false);
    } catch (err) {
      say(err.message, true);
    }
  }
  async function loadSnapshot(e) {
    const file = e.target.files[0];
    if (!file) return;
    let snapshot;
    try { snapshot = JSON.parse(await file.text()); } catch { say("That file is not a JSON snapshot.", true); return; }
    run("new", { method: "POST", body: json({ snapshot }) });
  }
  async function loadTrace(e) {
    const file = e.target.files[0];
    if (!file) return;
    run("trace", { method: "POST", body: await file.text(), headers: { "Content-Type": "application/yaml" } });
  }
  run("state", { method: "GET" });
})();
