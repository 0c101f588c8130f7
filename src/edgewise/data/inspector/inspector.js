// The edgewise inspector: renders one pack (a "view": the request, the /v1/pack reply, the pruning
// of the chunks it cut and the position curve that placed them) as a page. On /ui the view is built
// from the server's API as the options change; in a file written by `edgewise pack --html` it is
// embedded. Every value of the request and the reply goes into the page as text (textContent,
// Text nodes, attributes set one by one): retrieved chunks are untrusted, and none of their text is
// ever parsed as markup.
"use strict";

(function () {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const DEBOUNCE_MS = 250;
  const $ = (id) => document.getElementById(id);

  // -- building nodes -------------------------------------------------------------------------

  function el(tag, attrs, children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    for (const child of children || []) node.append(child);  // a string becomes a Text node
    return node;
  }

  function svgEl(tag, attrs, children) {
    const node = document.createElementNS(SVG_NS, tag);
    setAttrs(node, attrs);
    for (const child of children || []) node.append(child);
    return node;
  }

  function setAttrs(node, attrs) {
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(name, String(value));
    }
  }

  // -- what the debug record says, in words -----------------------------------------------------

  const fmt = {
    rank: (r) => (r.rank === null ? "-" : String(r.rank + 1)),
    score: (r) => (typeof r.score === "number" ? r.score.toFixed(3) : "-"),
    where: (r) => (r.position === null ? "-" : `#${r.position} ${r.section || ""}`.trim()),
    tokens: (r) => (r.tokens === null ? "-" : String(r.tokens)),
    outcome: (r) => (!r.pruned ? r.outcome : r.outcome === "placed" ? "pruned" : `pruned, ${r.outcome}`),
  };
  const FORMS = { placed: "whole", truncated: "truncated", summarized: "summary" };

  function sectionLabel(name) {
    return /^[A-Z]$/.test(name) ? `section ${name}` : name;
  }

  function given(item) {
    if (typeof item === "string") return { text: item, title: null };
    if (item && typeof item === "object") {
      return { text: typeof item.text === "string" ? item.text : "", title: typeof item.title === "string" ? item.title : null };
    }
    return { text: String(item), title: null };
  }

  /** The records by chunk id: the one of each id that was not merged into another. */
  function recordsById(debug) {
    const out = new Map();
    for (const r of debug.chunks) if (r.merged_into === null) out.set(r.id, r);
    return out;
  }

  function sectionsById(debug) {
    const out = new Map();
    for (const [name, ids] of Object.entries(debug.sections)) for (const id of ids) out.set(id, name);
    return out;
  }

  // -- the prompt: fixed layers, section headers and chunk blocks --------------------------------

  const SECTION_HEADERS = { "Section A: key facts": "A", "Section B: extended context": "B",
    "Section C: critical reminders": "C", Documents: "documents" };
  const LAYER_HEADERS = { System: "system", "Task instructions": "instructions", "User profile": "profile",
    Question: "question", "Expected output": "expected" };
  const HEADER = /^\[([^\]\n]+)\]$/;
  const OPEN = /^<(doc|reminder) id=("(?:[^"\\]|\\.)*")/;
  const CLOSE = /^<\/(doc|reminder)>$/;
  const PAPER_DOC = /^Document \[(\d+)\]\(Title: /;
  const KV_RECORD = /^[{ ]("(?:[^"\\]|\\.)*"): /;
  const QUESTION_LINE = /^(Question|Key): /;

  function jsonString(literal) {
    try { return JSON.parse(literal); } catch (e) { return null; }
  }

  /** The prompt cut into parts: layers, section headers, chunk blocks and the text between them.
   * Only lines at the left margin are structure (every line of a payload is indented), so no
   * chunk text can be taken for a header or a tag. The parts' texts join to the prompt. */
  function promptParts(prompt, debug) {
    const ids = new Set(debug.order);
    const parts = [];
    let current = null;
    const start = (part) => { current = { text: "", ...part }; parts.push(current); return current; };
    const lines = prompt.split("\n");
    lines.forEach((line, i) => {
      const text = i < lines.length - 1 ? `${line}\n` : line;
      let m;
      if (line === "" || line.startsWith("  ")) {  // a payload line or a blank one: it goes with what is open
        if (!current) start(parts.length ? { kind: "text" } : { kind: "layer", layer: "system", name: "System" });
      } else if ((m = HEADER.exec(line))) {
        const name = m[1];
        start(name in SECTION_HEADERS ? { kind: "section", section: SECTION_HEADERS[name], name }
          : { kind: "layer", layer: LAYER_HEADERS[name] || "other", name });
      } else if ((m = OPEN.exec(line)) && jsonString(m[2]) !== null) {
        start({ kind: "chunk", id: jsonString(m[2]), reminder: m[1] === "reminder" });
      } else if (CLOSE.test(line) && current && current.kind === "chunk") {
        current.text += text;
        current = null;
        return;
      } else if ((m = PAPER_DOC.exec(line)) && debug.order[Number(m[1]) - 1] !== undefined) {
        start({ kind: "chunk", id: debug.order[Number(m[1]) - 1], reminder: false });
      } else if ((m = KV_RECORD.exec(line)) && ids.has(jsonString(m[1]))) {
        start({ kind: "chunk", id: jsonString(m[1]), reminder: false });
      } else if ((m = QUESTION_LINE.exec(line))) {
        start({ kind: "layer", layer: "question", name: m[1] });
      } else {
        start({ kind: "text" });
      }
      current.text += text;
    });
    return parts;
  }

  function renderPrompt(view) {
    const debug = view.result.debug_info;
    const records = recordsById(debug);
    const sections = sectionsById(debug);
    const pre = $("prompt");
    pre.replaceChildren();
    for (const part of promptParts(view.result.prompt, debug)) {
      if (part.kind === "chunk") {
        const r = records.get(part.id);
        const row = r ? r.input_index : null;
        pre.append(el("a", {
          class: part.reminder ? "chunk reminder" : "chunk",
          href: row === null ? null : `#row-${row}`,
          id: row === null ? null : `prompt-${row}${part.reminder ? "-reminder" : ""}`,
          "data-id": part.id,
          "data-section": part.reminder ? "C" : sections.get(part.id) || "",
          "data-form": part.reminder ? "summary" : r ? FORMS[r.outcome] || "" : "",
          title: r ? `${part.id}: ${r.reason}` : part.id,
        }, [part.text]));
      } else if (part.kind === "layer") {
        pre.append(el("span", { class: `layer layer-${part.layer}`, "data-layer": part.name }, [part.text]));
      } else if (part.kind === "section") {
        pre.append(el("span", { class: "section-mark", "data-section": part.section }, [part.text]));
      } else {
        pre.append(part.text);
      }
    }
  }

  // -- a row per input chunk ------------------------------------------------------------------

  /** The chunk's text, with the sentences its pruning kept marked and the rest struck through
   * (offsets are code points, as Python counts them; marks only where each span's text matches). */
  function chunkText(text, pruned) {
    const node = el("div", { class: "chunk-text" });
    const spans = pruned && pruned.meta && pruned.meta.prune && pruned.meta.prune.spans;
    const points = Array.from(text);
    const slice = (a, b) => points.slice(a, b).join("");
    if (!Array.isArray(spans) || !spans.every((s) => slice(s.start, s.end) === s.text)) {
      node.append(text);
      return node;
    }
    const cut = (t) => (t.trim() ? el("del", { class: "pruned", title: "pruned" }, [t]) : t);
    let at = 0;
    for (const s of [...spans].sort((a, b) => a.start - b.start)) {
      if (s.start > at) node.append(cut(slice(at, s.start)));
      node.append(el("mark", { class: "kept", title: `kept: sentence score ${s.score}` }, [s.text]));
      at = s.end;
    }
    if (at < points.length) node.append(cut(slice(at)));
    return node;
  }

  function renderRows(view) {
    const debug = view.result.debug_info;
    const pruned = new Map((view.pruning || []).map((c) => [c.id, c]));
    const tbody = $("rows");
    tbody.replaceChildren();
    for (const r of debug.chunks) {
      const chunk = given(view.chunks[r.input_index]);
      const where = fmt.where(r);
      const outcome = fmt.outcome(r);
      const cut = r.pruned && r.merged_into === null ? pruned.get(r.id) : undefined;
      const preview = chunk.title || (chunk.text.length > 60 ? `${chunk.text.slice(0, 60)}…` : chunk.text);
      tbody.append(el("tr", { id: `row-${r.input_index}`, class: `outcome-${r.outcome}`, "data-id": r.id }, [
        el("td", { class: "c-index" }, [String(r.input_index)]),
        el("td", { class: "c-id" }, [r.id]),
        el("td", { class: "c-rank" }, [fmt.rank(r)]),
        el("td", { class: "c-score" }, [fmt.score(r)]),
        el("td", { class: "c-outcome" }, [el("span", { class: outcome === "pruned" ? "o-pruned" : `o-${r.outcome}` }, [outcome])]),
        el("td", { class: "c-where" }, [r.position === null ? where : el("a", { href: `#prompt-${r.input_index}` }, [where])]),
        el("td", { class: "c-tokens" }, [fmt.tokens(r)]),
        el("td", { class: "c-reason" }, [r.reason]),
        el("td", { class: "c-text" }, [el("details", {}, [el("summary", {}, [preview]), chunkText(chunk.text, cut)])]),
      ]));
    }
  }

  // -- the budget by layer and section --------------------------------------------------------

  /** The parts of the budget, from the debug record: the fixed prefix (system and the layers
   * before the chunks: cache_prefix_tokens), each section (its chunks' tokens), the rest of the
   * prompt (question, headers, tags, reminders) and what is left of the budget. */
  function budgetParts(debug) {
    const used = Math.max(debug.prompt_tokens, debug.message_tokens);
    const bySection = new Map(Object.keys(debug.sections).map((name) => [name, 0]));
    for (const r of debug.chunks) {
      if (r.tokens !== null && bySection.has(r.section)) bySection.set(r.section, bySection.get(r.section) + r.tokens);
    }
    const parts = [{ part: "system", label: "system & fixed layers", tokens: debug.cache_prefix_tokens }];
    let inSections = 0;
    for (const [name, tokens] of bySection) {
      parts.push({ part: "section", section: name, label: sectionLabel(name), tokens });
      inSections += tokens;
    }
    parts.push({ part: "question", label: "question & structure", tokens: used - debug.cache_prefix_tokens - inSections });
    if (debug.budget !== null) parts.push({ part: "left", label: "left over", tokens: debug.remaining_tokens });
    return parts;
  }

  function renderBudget(view) {
    const debug = view.result.debug_info;
    const parts = budgetParts(debug);
    const whole = debug.budget !== null ? debug.budget : Math.max(debug.prompt_tokens, debug.message_tokens);
    const share = (n) => (whole > 0 ? Math.max(0, n) / whole : 0);
    const bar = $("budget-bar");
    const legend = $("budget-legend").tBodies[0];
    bar.replaceChildren();
    legend.replaceChildren();
    for (const p of parts) {
      const cls = `part part-${p.part}`;
      const seg = el("div", { class: cls, "data-part": p.label, "data-section": p.section, title: `${p.label}: ${p.tokens} tokens` });
      seg.style.width = `${(share(p.tokens) * 100).toFixed(3)}%`;
      bar.append(seg);
      legend.append(el("tr", { "data-part": p.label }, [
        el("td", { class: "name" }, [el("span", { class: `swatch ${cls}`, "data-section": p.section }), p.label]),
        el("td", { class: "tokens" }, [String(p.tokens)]),
        el("td", { class: "share" }, [`${(share(p.tokens) * 100).toFixed(1)}%`]),
      ]));
    }
    bar.setAttribute("aria-label", parts.map((p) => `${p.label} ${p.tokens}`).join(", "));
  }

  // -- the position curve ---------------------------------------------------------------------

  function interpolate(curve, x) {
    if (curve.length === 1) return curve[0];
    const pos = x * (curve.length - 1);
    const lo = Math.min(Math.floor(pos), curve.length - 2);
    const frac = pos - lo;
    return curve[lo] * (1 - frac) + curve[lo + 1] * frac;
  }

  function curveNote(view) {
    const debug = view.result.debug_info;
    const placement = debug.placement;
    if (placement) return `order auto: ${placement.reason}`;
    if (view.curve) return `order calibrated: the profile ${view.curve.name} placed the chunks`;
    return `order ${debug.strategy} places without a measured profile (order auto and calibrated:FILE do)`;
  }

  function renderCurve(view) {
    const box = $("curve");
    box.replaceChildren();
    $("curve-note").textContent = curveNote(view);
    const c = view.curve;
    if (!c || !c.accuracy.length) return;
    const debug = view.result.debug_info;
    const [W, H, L, R, T, B] = [480, 220, 44, 12, 20, 30];
    const top = Math.max(...c.accuracy, ...c.measured.map((m) => m.interval[1]), 0.01);
    const yMax = Math.ceil((top * 1.1) / 0.05) * 0.05;
    const x = (rel) => L + rel * (W - L - R);
    const y = (acc) => T + (1 - acc / yMax) * (H - T - B);
    const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": `position curve of ${c.name}` });
    svg.append(svgEl("title", {}, [`${c.name}: accuracy by place in the prompt`]));
    for (let i = 0; i <= 4; i += 1) {
      const acc = (yMax * i) / 4;
      svg.append(svgEl("line", { class: "grid", x1: L, x2: W - R, y1: y(acc), y2: y(acc) }));
      svg.append(svgEl("text", { x: L - 6, y: y(acc) + 3, "text-anchor": "end" }, [`${Math.round(acc * 100)}%`]));
    }
    svg.append(svgEl("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
    [["first", 0, "start"], ["middle", 0.5, "middle"], ["last", 1, "end"]].forEach(([label, rel, anchor]) => {
      svg.append(svgEl("text", { x: x(rel), y: H - B + 14, "text-anchor": anchor }, [label]));
    });
    const n = c.accuracy.length;
    const points = c.accuracy.map((a, i) => `${x(n > 1 ? i / (n - 1) : 0)},${y(a)}`).join(" ");
    svg.append(svgEl("polyline", { class: "line", points: n > 1 ? points : `${x(0)},${y(c.accuracy[0])} ${x(1)},${y(c.accuracy[0])}` }));
    for (const m of c.measured) {
      svg.append(svgEl("line", { class: "interval", x1: x(m.relative_position), x2: x(m.relative_position),
        y1: y(m.interval[0]), y2: y(m.interval[1]) }));
      svg.append(svgEl("circle", { class: "measured", cx: x(m.relative_position), cy: y(m.accuracy), r: 4 }, [
        svgEl("title", {}, [`measured: ${Math.round(m.accuracy * 100)}% at place ${m.position}, n=${m.n}`])]));
    }
    const records = recordsById(debug);
    const placed = debug.order.length;
    debug.order.forEach((id, slot) => {
      const rel = placed > 1 ? slot / (placed - 1) : 0;
      const acc = interpolate(c.accuracy, rel);
      const r = records.get(id);
      const rank = r ? fmt.rank(r) : "-";
      svg.append(svgEl("circle", { class: "chunk-dot", cx: x(rel), cy: y(acc), r: 5, "data-id": id, "data-slot": slot,
        "data-rank": rank }, [svgEl("title", {}, [`${id}: rank ${rank}, place ${slot + 1} of ${placed}`])]));
      if (placed <= 30) svg.append(svgEl("text", { class: "dot-label", x: x(rel), y: y(acc) - 8, "text-anchor": "middle" }, [rank]));
    });
    box.append(svg);
  }

  // -- the numbers, the request, the exports --------------------------------------------------

  function renderPairs(dl, pairs) {
    dl.replaceChildren();
    for (const [name, value] of pairs) dl.append(el("dt", {}, [name]), el("dd", { "data-name": name }, [String(value)]));
  }

  function renderStats(view) {
    const d = view.result.debug_info;
    const count = (outcome) => d.chunks.filter((r) => r.outcome === outcome).length;
    renderPairs($("stats"), [
      ["prompt tokens", `${d.prompt_tokens}${d.estimated ? " (estimated)" : ""}`],
      ["message tokens", d.message_tokens],
      ["budget", d.budget === null ? "no limit" : d.budget],
      ["left over", d.remaining_tokens === null ? "-" : d.remaining_tokens],
      ["tokenizer", d.tokenizer],
      ["order", d.strategy],
      ["layout", d.layout],
      ["scorer", d.scorer],
      ["cache prefix tokens", d.cache_prefix_tokens],
      ["chunks", `${d.chunks.length}: ${count("placed")} placed, ${count("summarized")} summarized, `
        + `${count("truncated")} truncated, ${count("dropped")} dropped; ${d.pruned.length} pruned`],
    ]);
    $("placement").textContent = d.placement ? `order auto: ${d.placement.reason}` : "";
  }

  function renderRequest(view) {
    $("request-source").textContent = view.source || "";
    $("request-query").textContent = view.query;
    renderPairs($("request-options"), Object.entries(view.options).map(([k, v]) => [k, JSON.stringify(v)]));
  }

  let exported = [];  // the object URLs of the current exports, revoked when they are replaced

  function renderExports(view) {
    const format = $("messages-format").value;
    const messages = view.messages ? view.messages[format] : view.result.messages;
    const json = (value) => JSON.stringify(value, null, 2);
    const request = { query: view.query, chunks: view.chunks, options: view.options, messages_format: format };
    const files = [
      ["prompt", "prompt.txt", "text/plain", view.result.prompt],
      ["messages", `messages-${format}.json`, "application/json", json(messages)],
      ["debug", "debug_info.json", "application/json", json(view.result.debug_info)],
      ["request", "request.json", "application/json", json(request)],
    ];
    exported.forEach((url) => URL.revokeObjectURL(url));
    exported = [];
    const list = $("exports");
    list.replaceChildren();
    for (const [key, name, type, text] of files) {
      const url = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }));
      exported.push(url);
      const copy = el("button", { type: "button", "data-copy": key }, ["copy"]);
      copy.addEventListener("click", () => copyText(text, copy));
      list.append(el("li", {}, [el("a", { id: `export-${key}`, href: url, download: name }, [name]), copy]));
    }
  }

  function copyText(text, button) {
    const done = () => { button.textContent = "copied"; setTimeout(() => { button.textContent = "copy"; }, 1500); };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(done, () => fallbackCopy(text, done));
    } else {
      fallbackCopy(text, done);
    }
  }

  function fallbackCopy(text, done) {
    const area = el("textarea", { readonly: "" }, []);
    area.value = text;
    document.body.append(area);
    area.select();
    if (document.execCommand("copy")) done();
    area.remove();
  }

  let renders = 0;

  function render(view) {
    renderStats(view);
    renderBudget(view);
    renderCurve(view);
    renderPrompt(view);
    renderRows(view);
    renderExports(view);
    if (document.body.dataset.mode === "file") renderRequest(view);
    renders += 1;
    document.body.dataset.renders = String(renders);
  }

  function setState(state, message) {
    document.body.dataset.state = state;
    $("status").textContent = message;
  }

  // -- /ui: the view built from the API as the options change ---------------------------------

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const key = $("api-key").value.trim();
    if (key) headers.Authorization = `Bearer ${key}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const why = data && data.error ? data.error.message : res.statusText;
      throw new Error(`${method} ${path.split("?")[0]}: ${res.status} ${why}`);
    }
    return data;
  }

  const NAMED = ["order", "layout", "scorer", "tokenizer"];  // registry names, some with an argument (NAME:ARG)

  function fillSelect(id, names, blank) {
    const select = $(id);
    const keep = select.value;
    select.replaceChildren(...(blank === null ? [] : [el("option", { value: "" }, [blank])]),
      ...names.map((name) => el("option", { value: name }, [name])));
    if (names.includes(keep)) select.value = keep;
    showArgument(id);
  }

  function showArgument(id) {
    const arg = $(`${id}-arg`);
    if (!arg) return;
    const value = $(id).value;
    arg.hidden = !value.includes(":");
    arg.placeholder = value.split(":").slice(1).join(":");
  }

  function namedValue(id) {
    const value = $(id).value;
    return value.includes(":") ? `${value.split(":")[0]}:${$(`${id}-arg`).value.trim()}` : value;
  }

  async function loadCapabilities() {
    const caps = await api("GET", "/v1/capabilities");
    const names = (list) => list.map((entry) => entry.name);
    fillSelect("order", names(caps.orders), "(the server's default)");
    fillSelect("layout", names(caps.layouts), "(default: sections)");
    fillSelect("scorer", names(caps.scorers), "(default)");
    fillSelect("tokenizer", names(caps.tokenizers), "(default)");
    fillSelect("model", caps.models, "(none)");
    fillSelect("prune-scorer", caps.prune_scorers, null);
    $("retrieve-row").hidden = !caps.store;  // the server was started with --store
  }

  /** Put a request's options into the controls (the rest into "more options"). */
  function applyOptions(options) {
    const rest = { ...options };
    if ("budget" in rest) {
      $("budget-on").checked = rest.budget !== null;
      if (rest.budget !== null) setBudget(rest.budget);
      delete rest.budget;
    }
    for (const id of [...NAMED, "model"]) {
      if (typeof rest[id] !== "string") continue;
      const value = rest[id];
      const listed = [...$(id).options].find((o) => o.value === value || (o.value.includes(":") && value.startsWith(o.value.split(":")[0] + ":")));
      if (!listed) continue;
      $(id).value = listed.value;
      if (listed.value.includes(":")) $(`${id}-arg`).value = value.slice(value.indexOf(":") + 1);
      showArgument(id);
      delete rest[id];
    }
    if (typeof rest.prune === "number") {
      $("prune-on").checked = true;
      $("prune").value = String(rest.prune);
      $("prune-value").textContent = rest.prune.toFixed(2);
      delete rest.prune;
    }
    if (typeof rest.prune_scorer === "string" && [...$("prune-scorer").options].some((o) => o.value === rest.prune_scorer)) {
      $("prune-scorer").value = rest.prune_scorer;
      delete rest.prune_scorer;
    }
    $("more").value = Object.keys(rest).length ? JSON.stringify(rest) : "";
  }

  function setBudget(value) {
    $("budget-value").value = String(value);
    const slider = $("budget");
    if (Number(value) > Number(slider.max)) slider.max = String(value);
    slider.value = String(value);
  }

  function parseChunks(text) {
    const t = text.trim();
    if (!t) return null;
    try { return JSON.parse(t); } catch (e) { /* not one JSON value: JSON lines */ }
    return text.split("\n").flatMap((line, i) => {
      if (!line.trim()) return [];
      try { return [JSON.parse(line)]; } catch (e) { throw new Error(`chunks: line ${i + 1} is not JSON (${e.message})`); }
    });
  }

  function readOptions() {
    const options = {};
    if ($("budget-on").checked) {
      const budget = Number($("budget-value").value);
      if (!Number.isInteger(budget) || budget < 1) throw new Error(`budget must be an integer > 0, but got ${$("budget-value").value}`);
      options.budget = budget;
    }
    for (const id of NAMED) if ($(id).value) options[id] = namedValue(id);
    if ($("model").value) options.model = $("model").value;
    if ($("prune-on").checked) {
      options.prune = Number($("prune").value);
      options.prune_scorer = $("prune-scorer").value || "auto";
    }
    const more = $("more").value.trim();
    if (more) {
      let extra;
      try { extra = JSON.parse(more); } catch (e) { throw new Error(`more options: not JSON (${e.message})`); }
      if (!extra || typeof extra !== "object" || Array.isArray(extra)) throw new Error("more options must be a JSON object");
      Object.assign(options, extra);
    }
    return options;
  }

  /** The /v1/pack request the controls describe; null while there are no chunks yet. */
  function readRequest() {
    let chunks = parseChunks($("chunks").value);
    if (chunks && !Array.isArray(chunks) && typeof chunks === "object" && Array.isArray(chunks.chunks)) {
      const request = chunks;  // a whole request: its query and options go into their controls
      if (typeof request.query === "string") $("query").value = request.query;
      if (request.options && typeof request.options === "object") applyOptions(request.options);
      $("chunks").value = JSON.stringify(request.chunks, null, 2);
      chunks = request.chunks;
    }
    if (chunks === null) return null;
    if (!Array.isArray(chunks)) throw new Error("chunks must be a JSON array, JSON lines, or a request with \"chunks\"");
    return { query: $("query").value, chunks, options: readOptions(), messages_format: $("messages-format").value };
  }

  async function pruningOf(request, debug) {
    const cut = debug.chunks.filter((r) => r.pruned && r.merged_into === null);
    if (!cut.length) return null;
    const chunks = cut.map((r) => {
      const item = request.chunks[r.input_index];
      return typeof item === "string" ? { id: r.id, text: item } : { ...item, id: r.id };
    });
    const threshold = debug.placement ? debug.placement.prune : request.options.prune;
    return api("POST", "/v1/prune", { query: request.query, chunks, threshold,
      relative: Boolean(request.options.prune_relative), scorer: request.options.prune_scorer || "auto" });
  }

  async function curveOf(debug) {
    const profile = debug.placement && debug.placement.profile;
    if (profile) return api("GET", `/ui/curve?profile=${encodeURIComponent(profile.name)}`);
    if (debug.strategy.startsWith("calibrated:")) return api("GET", `/ui/curve?strategy=${encodeURIComponent(debug.strategy)}`);
    return null;
  }

  let sequence = 0;
  let timer = null;

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(update, DEBOUNCE_MS);
  }

  async function update() {
    const mine = ++sequence;
    let request;
    try {
      request = readRequest();
    } catch (e) {
      setState("error", e.message);
      return;
    }
    if (request === null) {
      setState("idle", "paste or load chunks to pack them");
      return;
    }
    setState("loading", "packing…");
    try {
      const result = await api("POST", "/v1/pack", request);
      if (mine !== sequence) return;
      const debug = result.debug_info;
      const notes = [];  // the pack shows even when its pruning or its curve cannot be read
      const extra = (what, promise) => promise.catch((e) => { notes.push(`${what}: ${e.message}`); return null; });
      const [pruning, curve] = await Promise.all([extra("the pruned sentences", pruningOf(request, debug)),
        extra("the position curve", curveOf(debug))]);
      if (mine !== sequence) return;
      render({ ...request, source: "edgewise serve /ui", result, pruning, curve });
      setState("ready", [`packed ${debug.chunks.length} chunks into ${debug.prompt_tokens} tokens`, ...notes].join("; "));
    } catch (e) {
      if (mine === sequence) setState("error", e.message);
    }
  }

  /** The store's hits for the query (POST /v1/retrieve) become the chunks, and are packed. */
  async function retrieveFromStore() {
    const request = { question: $("query").value, top_n: Number($("top-n").value), mode: $("mode").value };
    ++sequence;  // a pack scheduled before the click is not shown over the hits
    clearTimeout(timer);
    setState("loading", "retrieving…");
    let reply;
    try {
      reply = await api("POST", "/v1/retrieve", request);
    } catch (e) {
      setState("error", e.message);
      return;
    }
    $("chunks").value = JSON.stringify(reply.chunks, null, 2);
    await update();
  }

  async function loadFile(file) {
    const text = await file.text();
    $("chunks").value = text;
    schedule();
  }

  function wire() {
    for (const id of ["query", "chunks", "more", "order-arg", "layout-arg", "scorer-arg", "tokenizer-arg"]) {
      $(id).addEventListener("input", schedule);
    }
    for (const id of [...NAMED, "model", "prune-scorer", "budget-on", "prune-on", "messages-format"]) {
      $(id).addEventListener("change", () => { showArgument(id); schedule(); });
    }
    $("budget").addEventListener("input", () => { $("budget-value").value = $("budget").value; schedule(); });
    $("budget-value").addEventListener("input", () => { setBudget($("budget-value").value); schedule(); });
    $("prune").addEventListener("input", () => { $("prune-value").textContent = Number($("prune").value).toFixed(2); schedule(); });
    $("file").addEventListener("change", () => { if ($("file").files.length) loadFile($("file").files[0]); });
    $("retrieve").addEventListener("click", retrieveFromStore);
    let typing = null;
    $("api-key").addEventListener("input", () => { clearTimeout(typing); typing = setTimeout(start, DEBOUNCE_MS); });
  }

  async function start() {
    try {
      await loadCapabilities();
    } catch (e) {
      setState("error", `${e.message} (an API key goes in Options)`);
      return;
    }
    schedule();
  }

  function boot() {
    const embedded = $("edgewise-view");
    if (embedded) {  // a file: the view is in the page
      document.body.dataset.mode = "file";
      const view = JSON.parse(embedded.textContent);
      $("messages-format").value = view.messages_format || "openai";
      $("messages-format").addEventListener("change", () => renderExports(view));
      render(view);
      setState("ready", view.source || "");
      return;
    }
    document.body.dataset.mode = "live";
    for (const id of [...NAMED, "model"]) fillSelect(id, [], "(default)");
    wire();
    setState("idle", "reading the server's capabilities…");
    start();
  }

  boot();
}());
