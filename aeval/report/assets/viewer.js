// aeval sample viewer: filters, a virtualised list and one verdict in detail.
// Data comes from the JSON blocks aeval.report.viewer embeds; every string from
// the run goes into the page through textContent, never as markup.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const readJSON = (id) => JSON.parse($(id).textContent);
  const meta = readJSON("aeval-meta");
  const ix = readJSON("aeval-index");
  const D = ix.dict;
  const N = ix.i.length;
  const col = (name) => Int32Array.from(ix[name]);
  const M = col("m"), T = col("t"), G = col("g"), S = col("s"), R = col("r"), DIR = col("d");
  const P = col("p"), F = col("f"), PT = col("pt"), CT = col("ct");
  // Older pages' data lacks these columns: every verdict reads "none" (-1).
  const colOr = (name) => (ix[name] ? col(name) : new Int32Array(N).fill(-1));
  const PG = colOr("pg"), DS = colOr("ds"), SX = colOr("sx"), GV = colOr("gv"), RT = colOr("rt");
  // Repair rounds: rounds asked and the first equivalent round (-1: never) of each answer.
  const RD = ix.rd ? col("rd") : new Int32Array(N).fill(1), SR = colOr("sr");
  const ROUNDS = meta.rounds || 1;
  for (const key of ["program", "standing", "group"]) D[key] = D[key] || [];
  const IDS = ix.i;
  const EQ = D.status.indexOf("equivalent");
  const INFRA = new Set(meta.infra.map((s) => D.status.indexOf(s)));
  const ROW = 26;
  const blocks = new Map();
  let idNumbers = null;

  const KIND = {
    equivalent: "k-ok", not_equivalent: "k-bad", unknown: "k-warn", timeout: "k-warn",
    resource_limit: "k-warn", api_error: "k-infra", missing: "k-infra", bad_ground_truth: "k-infra",
  };
  const kind = (status) => KIND[status] || "k-fmt";

  // The heavy blocks are gzip-compressed JSON in base64 (a tenth of the size):
  // each is decoded once, the first time one of its verdicts is opened.
  async function decode(node) {
    if (node.dataset.encoding !== "gzip+base64") return JSON.parse(node.textContent);
    const bin = atob(node.textContent.trim());
    const bytes = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }
  function block(id) {
    let data = blocks.get(id);
    if (!data) {
      data = decode($(id));
      blocks.set(id, data);
    }
    return data;
  }
  async function detail(k) {
    const c = Math.floor(k / ix.chunk);
    return (await block("aeval-d-" + c))[k - c * ix.chunk];
  }
  async function item(id) {
    const all = await block("aeval-items");
    return Object.prototype.hasOwnProperty.call(all, id) ? all[id] : null;
  }

  // ---- filters ------------------------------------------------------------------
  const state = { model: "", trial: "", tier: "", status: "", repair: "", reading: "",
    program: "", distance: "", standing: "", group: "", rounds: "", q: "" };
  let open = -1;
  let view = new Int32Array(0);
  let pos = -1; // position of the open verdict in view, -1 if filtered out

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }
  function options(select, pairs) {
    for (const [value, label] of pairs) {
      const o = el("option", "", label);
      o.value = value;
      select.appendChild(o);
    }
  }
  function present(codes, dict) {
    const seen = new Set(codes);
    return dict.filter((_, i) => seen.has(i));
  }
  const repairNames = [...new Set(D.repaired.flatMap((r) => r.split("+")))].sort();
  options($("f-model"), [["", "all models"], ...D.model.map((m) => [m, m])]);
  options($("f-trial"), [["", "all trials"], ...[...new Set(T)].sort((a, b) => a - b).map((t) => [String(t), "trial " + t])]);
  options($("f-tier"), [["", "all tiers"], ...present(G, D.tier).map((t) => [t, t])]);
  options($("f-status"), [
    ["", "all statuses"], ["correct", "correct (equivalent)"], ["wrong", "wrong (model failures)"],
    ["infra", "infrastructure failures"], ...present(S, D.status).map((s) => [s, s]),
  ]);
  options($("f-repair"), [["", "any"], ["none", "no repair (strict)"], ["any", "repaired"],
    ...repairNames.map((r) => [r, r])]);
  options($("f-reading"), [["", "all"], ["lenient-only", "lenient ✓ strict ✗"],
    ["published-differs", "published ≠ lenient"], ["published-only", "published ✓ lenient ✗"]]);
  // What the items are: a filter only where the verdicts say it.
  const programs = present(PG, D.program);
  options($("f-program"), [["", "all programs"], ...programs.map((p) => [p, p])]);
  $("l-program").hidden = !programs.length;
  const distances = [...new Set(DS)].filter((d) => d >= 0).sort((a, b) => a - b);
  options($("f-distance"), [["", "all distances"], ...distances.map((d) => [String(d), "distance " + d])]);
  $("l-distance").hidden = !distances.length;
  const STANDING = {
    unsolved: "solved by no model", split: "models disagree (some never solve it)",
    mixed: "solved in some trials only", solved: "solved by every model, every trial",
  };
  options($("f-standing"), [["", "all items"], ...present(SX, D.standing).map((s) => [s, STANDING[s] || s])]);
  options($("f-group"), [["", "all"], ...present(GV, D.group).map((g) => [g, g])]);
  options($("f-rounds"), [["", "all answers"], ["first", "solved in round 1"],
    ["repaired", "solved in a later round"], ["unsolved", "not solved in any round"],
    ["asked-again", "asked more than once"]]);
  $("l-rounds").hidden = ROUNDS < 2;
  $("group-name").textContent = ix.by || "Group";
  $("l-group").hidden = !ix.by;

  function parseIds(q) {
    // "5,7,10-20": exact ids and numeric ranges, as --sample-id reads them.
    const exact = new Set(), ranges = [];
    for (const part of q.split(/[\s,]+/)) {
      if (!part) continue;
      const m = /^(\d+)-(\d+)$/.exec(part);
      if (m) ranges.push([Number(m[1]), Number(m[2])]);
      else exact.add(part);
    }
    return { exact, ranges };
  }

  function refilter() {
    const fm = state.model ? D.model.indexOf(state.model) : -2;
    const ft = state.trial ? Number(state.trial) : null;
    const fg = state.tier ? D.tier.indexOf(state.tier) : -2;
    const st = state.status;
    const fs = st && !["correct", "wrong", "infra"].includes(st) ? D.status.indexOf(st) : -2;
    const rep = state.repair;
    const repOk = D.repaired.map((r) => rep === "any" || r.split("+").includes(rep));
    const rd = state.reading;
    const fp = state.program ? D.program.indexOf(state.program) : -2;
    const fd = state.distance !== "" ? Number(state.distance) : null;
    const fx = state.standing ? D.standing.indexOf(state.standing) : -2;
    const fgv = state.group ? D.group.indexOf(state.group) : -2;
    const rn = state.rounds;
    let ids = null;
    if (state.q.trim()) {
      ids = parseIds(state.q.trim());
      if (ids.ranges.length && !idNumbers) idNumbers = Float64Array.from(IDS, (i) => (/^\d+$/.test(i) ? Number(i) : NaN));
    }
    const out = new Int32Array(N);
    let n = 0;
    for (let k = 0; k < N; k++) {
      if (fm !== -2 && M[k] !== fm) continue;
      if (ft !== null && T[k] !== ft) continue;
      if (fg !== -2 && G[k] !== fg) continue;
      if (fp !== -2 && PG[k] !== fp) continue;
      if (fd !== null && DS[k] !== fd) continue;
      if (fx !== -2 && SX[k] !== fx) continue;
      if (fgv !== -2 && GV[k] !== fgv) continue;
      if (rn === "first" && SR[k] !== 1) continue;
      if (rn === "repaired" && !(SR[k] > 1)) continue;
      if (rn === "unsolved" && (SR[k] !== -1 || INFRA.has(S[k]))) continue;
      if (rn === "asked-again" && RD[k] < 2) continue;
      const s = S[k];
      if (fs !== -2 && s !== fs) continue;
      if (st === "correct" && s !== EQ) continue;
      if (st === "wrong" && (s === EQ || INFRA.has(s))) continue;
      if (st === "infra" && !INFRA.has(s)) continue;
      if (rep === "none" && R[k] !== -1) continue;
      if (rep && rep !== "none" && (R[k] === -1 || !repOk[R[k]])) continue;
      if (rd === "lenient-only" && !(s === EQ && R[k] !== -1)) continue;
      if (rd === "published-differs" && (P[k] === -1 || (P[k] === 1) === (s === EQ))) continue;
      if (rd === "published-only" && !(P[k] === 1 && s !== EQ)) continue;
      if (ids && !ids.exact.has(IDS[k])) {
        let hit = false;
        if (ids.ranges.length) {
          const v = idNumbers[k];
          for (const [lo, hi] of ids.ranges) if (v >= lo && v <= hi) { hit = true; break; }
        }
        if (!hit) continue;
      }
      out[n++] = k;
    }
    view = out.subarray(0, n);
    pos = open >= 0 ? view.indexOf(open) : -1;
    summarise();
    $("spacer").style.height = n * ROW + "px";
    renderRows();
  }

  function summarise() {
    let eq = 0, infra = 0;
    for (const k of view) {
      if (S[k] === EQ) eq++;
      else if (INFRA.has(S[k])) infra++;
    }
    const scored = view.length - infra;
    const pct = scored ? ((100 * eq) / scored).toFixed(1) + "%" : "—";
    $("count").textContent = `${view.length.toLocaleString("en")} of ${N.toLocaleString("en")} verdicts · ` +
      `equivalent ${eq.toLocaleString("en")} (${pct} of scored)` + (infra ? ` · infra ${infra}` : "");
    $("count").dataset.shown = String(view.length);
  }

  // ---- the list (only the rows in view exist) -----------------------------------
  const list = $("list"), rowsBox = $("rows");
  function mark(ok) {
    return ok === null ? ["–", "na"] : ok ? ["✓", "yes"] : ["✗", "no"];
  }
  function row(k, at) {
    const status = D.status[S[k]];
    const r = el("div", "row" + (k === open ? " sel" : ""));
    r.dataset.k = String(k);
    r.dataset.at = String(at);
    r.dataset.status = status;
    r.appendChild(el("span", "dot " + kind(status)));
    r.appendChild(el("span", "c-item", IDS[k]));
    r.appendChild(el("span", "c-model", D.model[M[k]]));
    r.lastChild.title = D.model[M[k]];
    r.appendChild(el("span", "c-t", T[k]));
    r.appendChild(el("span", "c-tier", G[k] >= 0 ? D.tier[G[k]] : ""));
    r.appendChild(el("span", "c-status " + kind(status), status));
    const read = el("span", "c-read");
    const lenient = S[k] === EQ, infra = INFRA.has(S[k]);
    for (const ok of [infra ? null : lenient && R[k] === -1, infra ? null : lenient, P[k] === -1 ? null : P[k] === 1]) {
      const [sym, cls] = mark(ok);
      read.appendChild(el("span", cls, sym));
    }
    r.appendChild(read);
    const rep = [ROUNDS > 1 ? roundsText(k) : "", R[k] >= 0 ? D.repaired[R[k]] : "",
      DIR[k] >= 0 ? D.direction[DIR[k]] : ""].filter(Boolean);
    r.appendChild(el("span", "c-rep", rep.join(" · ")));
    r.lastChild.title = rep.join(" · ");
    return r;
  }
  function renderRows() {
    const h = list.clientHeight || 800;
    const first = Math.max(0, Math.floor(list.scrollTop / ROW) - 8);
    const last = Math.min(view.length, Math.ceil((list.scrollTop + h) / ROW) + 8);
    const frag = document.createDocumentFragment();
    for (let at = first; at < last; at++) frag.appendChild(row(view[at], at));
    rowsBox.style.transform = `translateY(${first * ROW}px)`;
    rowsBox.replaceChildren(frag);
  }
  let pending = false;
  list.addEventListener("scroll", () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; renderRows(); });
  });
  rowsBox.addEventListener("click", (e) => {
    const r = e.target.closest(".row");
    if (r) { select(Number(r.dataset.k)); list.focus(); }
  });

  // "r2 ✓": the rounds an answer was asked, and whether its last one was equivalent.
  function roundsText(k) {
    if (RD[k] < 2) return "";
    return `r${RD[k]} ` + (SR[k] > 1 ? "✓" : "✗");
  }
  function roundsFact(k) {
    if (SR[k] === 1) return "solved in round 1";
    if (SR[k] > 1) return `solved in round ${SR[k]} of ${ROUNDS}`;
    if (INFRA.has(S[k])) return "not asked again (infrastructure failure)";
    return RD[k] > 1 ? `not solved in ${RD[k]} rounds` : "not asked again";
  }
  // Rounds 2, 3, …: the feedback sent, then the answer it got and its verdict.
  function conversation(box, d, it) {
    const conv = el("div", "conversation");
    for (const turn of d.conv) {
      const round = el("section", "round");
      round.dataset.round = String(turn.r);
      round.appendChild(el("h4", "", `Feedback sent after round ${turn.r - 1}`));
      round.appendChild(turn.fb !== undefined ? el("pre", "feedback", turn.fb)
        : el("div", "muted", "not rebuilt (the run's feedback template could not be read)"));
      const head = el("h4", "", `Round ${turn.r} `);
      head.appendChild(el("span", "badge status " + kind(turn.s), turn.s));
      round.appendChild(head);
      const facts = el("dl", "facts");
      const add = (name, value) => {
        if (!value) return;
        facts.appendChild(el("dt", "", name));
        facts.appendChild(el("dd", "", value));
      };
      add("repairs", turn.rep ? turn.rep.split("+").join(", ") : "");
      add("direction", turn.dir);
      add("reason", turn.why);
      if (turn.ce) add("counterexample", Object.entries(turn.ce).map(([n, v]) => `${n} = ${v}`).join(", "));
      round.appendChild(facts);
      const wrong = turn.s !== "equivalent";
      const diff = turn.x !== undefined && it && wrong ? firstDifference(turn.x, it[1]) : null;
      round.appendChild(el("h4", "", "Extracted answer (as checked)"));
      round.appendChild(turn.x !== undefined ? marked("answer", turn.x, diff && diff[0]) : el("div", "muted", turn.xw || "—"));
      round.appendChild(el("h4", "", "Response"));
      round.appendChild(turn.res !== undefined ? response(turn) : el("div", "muted", turn.err ? `API error: ${turn.err}` : "not available"));
      conv.appendChild(round);
    }
    section(box, `Conversation: rounds 2–${d.conv[d.conv.length - 1].r} (round 1 above)`, conv);
  }

  // ---- one verdict in detail -----------------------------------------------------
  function section(parent, title, node) {
    parent.appendChild(el("h3", "", title));
    parent.appendChild(node);
  }
  function response(d) {
    const pre = el("pre", "response");
    const text = d.res;
    const cuts = new Set([0, text.length]);
    for (const [a, b] of d.th || []) { cuts.add(a); cuts.add(b); }
    if (d.an) { cuts.add(d.an[0]); cuts.add(d.an[1]); }
    const points = [...cuts].sort((a, b) => a - b);
    for (let i = 0; i + 1 < points.length; i++) {
      const [a, b] = [points[i], points[i + 1]];
      if (a === b) continue;
      const inThink = (d.th || []).some(([x, y]) => a >= x && b <= y);
      const inAnswer = d.an && a >= d.an[0] && b <= d.an[1];
      const piece = text.slice(a, b);
      let node = inAnswer ? el("mark", "", piece) : document.createTextNode(piece);
      if (inThink) { const s = el("span", "think"); s.appendChild(node); node = s; }
      pre.appendChild(node);
    }
    return pre;
  }
  const TOKEN = /\(|\)|[^\s()]+/g;
  function firstDifference(a, b) {
    const ta = [...a.matchAll(TOKEN)], tb = [...b.matchAll(TOKEN)];
    let i = 0;
    while (i < ta.length && i < tb.length && ta[i][0] === tb[i][0]) i++;
    if (i === ta.length && i === tb.length) return null;
    const span = (t) => (i < t.length ? [t[i].index, t[i].index + t[i][0].length] : null);
    return [span(ta), span(tb)];
  }
  function marked(cls, text, span) {
    const pre = el("pre", cls);
    if (!span) {
      pre.textContent = text;
      return pre;
    }
    pre.appendChild(document.createTextNode(text.slice(0, span[0])));
    const mark = el("span", "diff", text.slice(span[0], span[1]));
    mark.title = "first difference between the answer and the truth";
    pre.appendChild(mark);
    pre.appendChild(document.createTextNode(text.slice(span[1])));
    return pre;
  }
  function permalink(k) {
    const enc = encodeURIComponent;
    return `open=${enc(D.model[M[k]])}/${T[k]}/${enc(IDS[k])}`;
  }
  let showing = 0; // the latest request wins when keys move faster than blocks decode
  async function showDetail() {
    const token = ++showing;
    const box = $("detail");
    if (open < 0) {
      box.replaceChildren();
      delete box.dataset.shown;
      help(box);
      return;
    }
    const k = open, status = D.status[S[k]];
    let d, it;
    try {
      [d, it] = await Promise.all([detail(k), item(IDS[k])]);
    } catch (err) {
      box.replaceChildren(el("div", "muted", "cannot read this verdict's data: " + err));
      return;
    }
    if (token !== showing) return;
    box.replaceChildren();
    box.dataset.shown = `${D.model[M[k]]}/${T[k]}/${IDS[k]}`;
    const h = el("h2", "", `Item ${IDS[k]}`);
    h.appendChild(el("span", "muted", ` · ${D.model[M[k]]} · trial ${T[k]}` + (G[k] >= 0 ? ` · ${D.tier[G[k]]}` : "")));
    const link = el("a", "", "permalink");
    link.href = "#" + stateHash();
    h.appendChild(link);
    box.appendChild(h);
    if (pos < 0) box.appendChild(el("div", "muted", "(not in the current filter)"));

    const badges = el("div", "badges");
    badges.appendChild(el("span", "badge status " + kind(status), status));
    const infra = INFRA.has(S[k]), lenient = S[k] === EQ;
    const readings = [["strict", infra ? null : lenient && R[k] === -1], ["lenient", infra ? null : lenient],
      ["published", P[k] === -1 ? null : P[k] === 1]];
    for (const [name, ok] of readings) {
      const [sym, cls] = mark(ok);
      const b = el("span", "badge reading " + cls, `${name} ${sym}`);
      b.dataset.reading = name;
      badges.appendChild(b);
    }
    box.appendChild(badges);

    const facts = el("dl", "facts");
    const fact = (name, value) => {
      if (value === null || value === undefined || value === "") return;
      facts.appendChild(el("dt", "", name));
      const dd = el("dd", "", value);
      dd.dataset.fact = name;
      facts.appendChild(dd);
    };
    fact("repairs", R[k] >= 0 ? D.repaired[R[k]].split("+").join(", ") : "none");
    fact("direction", DIR[k] >= 0 ? D.direction[DIR[k]] : "");
    fact("reason", d.why);
    fact("published", d.pw);
    fact("finish reason", F[k] >= 0 ? D.finish[F[k]] : "");
    fact("program", PG[k] >= 0 ? D.program[PG[k]] : "");
    fact("distance", DS[k] >= 0 ? `${DS[k]} (target N − largest example N)` : "");
    fact("item standing", SX[k] >= 0 ? STANDING[D.standing[SX[k]]] || D.standing[SX[k]] : "");
    if (ix.by) fact(ix.by, GV[k] >= 0 ? D.group[GV[k]] : "");
    const tokens = [PT[k] >= 0 ? `prompt ${PT[k].toLocaleString("en")}` : "", CT[k] >= 0 ? `completion ${CT[k].toLocaleString("en")}` : "",
                    RT[k] > 0 ? `of which reasoning ${RT[k].toLocaleString("en")}` : ""];
    fact("tokens", tokens.filter(Boolean).join(" · "));
    fact("checked in", d.ms ? `${d.ms} ms` : "");
    if (ROUNDS > 1) fact("rounds", roundsFact(k));
    box.appendChild(facts);

    if (d.ce) {
      const table = el("table", "ce");
      for (const [name, value] of Object.entries(d.ce)) {
        const tr = el("tr");
        tr.appendChild(el("td", "", name));
        tr.appendChild(el("td", "", value));
        table.appendChild(tr);
      }
      section(box, "Counterexample (confirmed by Z3)", table);
    }
    // Where a wrong answer first departs from the truth, token by token (spacing ignored).
    const diff = d.x !== undefined && it && S[k] !== EQ ? firstDifference(d.x, it[1]) : null;
    section(box, "Extracted answer (as checked)", d.x !== undefined ? marked("answer", d.x, diff && diff[0]) : el("div", "muted", d.xw || "—"));
    section(box, "Ground truth", it ? marked("truth", it[1], diff && diff[1]) : el("div", "muted", "not available (dataset not loaded)"));
    if (d.res !== undefined) section(box, "Response (draft in grey, extracted answer marked)", response(d));
    else section(box, "Response", el("div", "muted", d.err ? `API error: ${d.err}` : "not available"));
    if (d.conv && d.conv.length) conversation(box, d, it);
    if (it) {
      section(box, "Question", el("pre", "question", it[0]));
      if (it[2]) section(box, "Declarations", el("pre", "constants", it[2]));
    }
  }
  function help(box) {
    const div = el("div", "help");
    div.appendChild(el("h2", "", "Open a verdict"));
    div.appendChild(el("p", "", "Click a row, or move with j / k (↓ / ↑), PgUp / PgDn, Home / End. " +
      "/ puts the cursor in the item search (ids: 5,7,10-20), Esc leaves it. " +
      "The address bar always holds a permalink to what you see."));
    div.appendChild(el("p", "muted", `Generated ${meta.generated}` + (meta.dataset ? ` · dataset ${meta.dataset}` : "")));
    box.appendChild(div);
  }

  // ---- selection, keyboard, permalink --------------------------------------------
  function select(k, scroll) {
    open = k;
    pos = k >= 0 ? view.indexOf(k) : -1;
    for (const r of rowsBox.children) r.classList.toggle("sel", Number(r.dataset.k) === k);
    if (scroll && pos >= 0) {
      const top = pos * ROW, h = list.clientHeight || 800;
      if (top < list.scrollTop) list.scrollTop = top;
      else if (top + ROW > list.scrollTop + h) list.scrollTop = top + ROW - h;
      renderRows();
    }
    showDetail();
    writeHash();
  }
  function move(delta) {
    if (!view.length) return;
    let at = pos < 0 ? (delta > 0 ? 0 : view.length - 1) : pos + delta;
    at = Math.max(0, Math.min(view.length - 1, at));
    select(view[at], true);
  }
  document.addEventListener("keydown", (e) => {
    const typing = e.target.matches("input, select");
    if (e.key === "Escape") {
      if (typing) e.target.blur();
      if (e.target.id === "f-q" && state.q) { e.target.value = ""; setFilter("q", ""); }
      list.focus();
      return;
    }
    if (typing || e.ctrlKey || e.metaKey || e.altKey) return;
    const page = Math.max(1, Math.floor((list.clientHeight || 800) / ROW) - 1);
    const moves = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1, PageDown: page, PageUp: -page, Home: -Infinity, End: Infinity };
    if (e.key in moves) {
      e.preventDefault();
      const d = moves[e.key];
      if (!Number.isFinite(d)) select(view[d > 0 ? view.length - 1 : 0] ?? -1, true);
      else move(d);
    } else if (e.key === "/") {
      e.preventDefault();
      $("f-q").focus();
    }
  });
  function setFilter(key, value) {
    state[key] = value;
    refilter();
    writeHash();
  }
  for (const node of document.querySelectorAll("#filters select")) {
    node.addEventListener("change", () => setFilter(node.dataset.key, node.value));
  }
  $("f-q").addEventListener("change", (e) => setFilter("q", e.target.value));
  $("filters").addEventListener("submit", (e) => { e.preventDefault(); setFilter("q", $("f-q").value); });

  function stateHash() {
    const parts = Object.entries(state).filter(([, v]) => v).map(([k, v]) => `${k}=${encodeURIComponent(v)}`);
    if (open >= 0) parts.push(permalink(open));
    return parts.join("&");
  }
  function writeHash() {
    const hash = stateHash();
    if (location.hash.slice(1) !== hash) history.replaceState(null, "", hash ? "#" + hash : location.pathname + location.search);
  }
  function findVerdict(value) {
    const parts = value.split("/");
    if (parts.length !== 3) return -1;
    const [model, trial, id] = parts.map(decodeURIComponent);
    const m = D.model.indexOf(model), t = Number(trial);
    for (let k = 0; k < N; k++) if (M[k] === m && T[k] === t && IDS[k] === id) return k;
    return -1;
  }
  function readHash() {
    const params = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      const at = part.indexOf("=");
      if (at > 0) params[part.slice(0, at)] = part.slice(at + 1);
    }
    for (const key of Object.keys(state)) {
      let value = "";
      try { value = decodeURIComponent(params[key] || ""); } catch (err) { value = ""; }
      state[key] = value;
      const input = document.querySelector(`#filters [data-key="${key}"]`);
      if (input) input.value = value;
    }
    open = params.open ? findVerdict(params.open) : -1;
    refilter();
    select(open, true);
  }
  window.addEventListener("hashchange", readHash);

  // ---- start -----------------------------------------------------------------------
  document.title = meta.title;
  $("title").textContent = meta.title;
  for (const note of meta.notes) $("notes").appendChild(el("div", "", "note: " + note));
  readHash();
  if (open < 0) list.focus();
  document.documentElement.dataset.ready = String(Math.round(performance.now()));
})();
