// One experiment's page: a snapshot from the API, then a server-sent event stream of
// deltas (a new result shows within about two seconds, without a reload). The page
// keeps every trial's points of the chosen metric and replaces a trial's points from
// the index a delta names (a rollback replaces the abandoned ones).
import { ago, bestText, el, fmt, getJSON, showProblem, stateChips, time } from "./common.js";
import { Curves } from "./curves.js";
import { renderLineage, renderStops } from "./extras.js";
import { Scatter } from "./scatter.js";
import { PAGE_SIZE, TrialsTable } from "./table.js";

const name = decodeURIComponent(location.pathname.replace(/^\/experiments\//, ""));
const api = `/api/experiments/${encodeURIComponent(name)}`;
const query = new URLSearchParams(location.search);
const MIN_REDRAW_MS = 250;

const state = {
  metric: query.get("metric"), mode: query.get("mode"), x: query.get("x") || "training_iteration",
  version: -1, summary: null, order: [], rows: new Map(), points: new Map(),
  metrics: [], configKeys: [], best: null, lineage: [], stops: [], rungs: [],
  selected: new Set(), filter: "", stateFilter: "",
  colors: new Map(),
  colorOf(id) {
    let color = this.colors.get(id);
    if (!color) {
      color = `hsl(${(this.colors.size * 137.508) % 360}, 62%, 45%)`;
      this.colors.set(id, color);
    }
    return color;
  },
};

const $ = (id) => document.getElementById(id);
const curves = new Curves($("curves"), $("hover"));
const scatter = new Scatter($("scatter"), $("scatter-hover"), $("scatter-note"));
const table = new TrialsTable($("trials"), { onSelect: toggle });
let stream = null;
let pending = null;
let drawnAt = 0;
let draws = 0; // the benchmark reads how many draws and how long the last one took

function toggle(id) {
  if (id !== null) {
    if (state.selected.has(id)) state.selected.delete(id);
    else state.selected.add(id);
  }
  render();
}

function select(id) {
  state.selected = new Set([id]);
  render();
  $("curves").scrollIntoView({ behavior: "smooth", block: "nearest" });
}

function apply(payload, whole) {
  if (whole) {
    state.rows = new Map();
    state.points = new Map();
  }
  state.version = payload.version;
  if (payload.since) state.since = payload.since;
  state.summary = payload.summary;
  if (payload.metric !== undefined) {
    state.metric = payload.metric;
    state.mode = payload.mode;
  }
  if (payload.order) state.order = payload.order;
  if (payload.metrics) state.metrics = payload.metrics;
  if (payload.config_keys) state.configKeys = payload.config_keys;
  if (payload.lineage) state.lineage = payload.lineage;
  if (payload.stops) state.stops = payload.stops;
  if (payload.rungs) state.rungs = payload.rungs;
  state.best = payload.best;
  for (const row of payload.trials) state.rows.set(row.id, row);
  for (const [id, part] of Object.entries(payload.series)) {
    const points = whole ? { x: [], y: [] } : (state.points.get(id) || { x: [], y: [] });
    points.x.length = Math.min(points.x.length, part.from);
    points.y.length = Math.min(points.y.length, part.from);
    for (let i = 0; i < part.x.length; i++) {
      points.x.push(part.x[i]);
      points.y.push(part.y[i]);
    }
    state.points.set(id, points);
  }
}

function render() {
  if (pending) return;
  const wait = Math.max(0, MIN_REDRAW_MS - (performance.now() - drawnAt));
  pending = setTimeout(() => requestAnimationFrame(draw), wait);
}

function draw() {
  pending = null;
  drawnAt = performance.now();
  draws += 1;
  const s = state.summary;
  document.title = `${name} · trialflow`;
  $("name").textContent = name;
  showProblem(s.problem);
  const when = [s.started_at ? `started ${time(s.started_at)}` : "", s.written_at ? `updated ${ago(s.written_at)}` : ""];
  $("summary").replaceChildren(
    el("span", { text: `${s.trials} trial(s) ` }), stateChips(s.states),
    el("span", { class: "muted", text: " " + when.filter(Boolean).join(", ") }),
  );
  for (const section of document.querySelectorAll("section.trials-only")) section.hidden = !state.order.length;
  $("best").replaceChildren(state.best
    ? el("span", {}, "best trial so far: ", el("span", { class: "value", text: bestText(state.best) }),
      el("span", { class: "muted", text: "  " + Object.entries(state.best.config).map(([k, v]) => `${k}=${fmt(v)}`).join(", ") }))
    : el("span", { class: "muted", text: noBest() }));
  options($("metric"), state.metrics, state.metric);
  options($("x"), ["training_iteration", ...state.metrics.filter((m) => m !== "training_iteration")], state.x);
  $("mode").value = state.mode || "";
  options($("config-key"), state.configKeys, $("config-key").value || state.configKeys[0]);
  options($("state"), ["", ...Object.keys(s.states)], state.stateFilter, "all");

  const parts = {};
  const timed = (part, fn) => {
    const t0 = performance.now();
    const value = fn();
    parts[part] = Math.round(performance.now() - t0);
    return value;
  };
  const rows = timed("filter", () => table.visible(state));
  const visible = new Set(rows.map((r) => r.id));
  // The chart's series in the journal's order, whatever the table's sort: a sort then
  // redraws nothing. The charts go first: the table's layout then happens once.
  const plotted = state.order.filter((id) => visible.has(id) && (!state.selected.size || state.selected.has(id)));
  $("shown").textContent = state.selected.size
    ? `${plotted.length} selected trial(s)` : `all ${plotted.length} trial(s) shown; click rows to pick`;
  timed("curves", () => curves.update(state, plotted));
  timed("scatter", () => scatter.update(state, rows, $("config-key").value));
  timed("table", () => table.render(state, rows));
  $("count").textContent = `${rows.length} of ${state.order.length} shown` +
    (state.selected.size ? `, ${state.selected.size} selected` : "");
  $("pager").hidden = table.pages < 2;
  $("range").textContent = `${table.page * PAGE_SIZE + 1}–${Math.min(rows.length, (table.page + 1) * PAGE_SIZE)} of ${rows.length}`;
  $("prev").disabled = table.page === 0;
  $("next").disabled = table.page >= table.pages - 1;
  $("clear").disabled = !state.selected.size;
  timed("extras", () => {
    renderLineage(state.lineage, select);
    renderStops(state.stops, state.rungs, select);
  });
  document.body.dataset.partsMs = JSON.stringify(parts);
  document.body.dataset.version = String(state.version);
  document.body.dataset.draws = String(draws);
  document.body.dataset.drawMs = (performance.now() - drawnAt).toFixed(1);
  document.body.dataset.ready = "1";
}

/** Why no trial is shown as best: no metric, no mode to rank it by (a guessed one would
 * call the highest loss best), or no finite value yet. */
function noBest() {
  if (!state.metric) return "no metric set: no trial reported a number yet";
  if (!state.mode) return `no best trial: no sweep ranks ${state.metric}; choose max or min as its mode`;
  return `no trial has a finite ${state.metric} yet`;
}

function options(select, values, chosen, blank) {
  const key = values.join("\u0000");
  if (select.dataset.values !== key) {
    select.dataset.values = key;
    select.replaceChildren(...values.map((v) => el("option", { value: v, text: v === "" ? blank : v })));
  }
  if (chosen !== null && chosen !== undefined) select.value = chosen;
}

function params() {
  const p = new URLSearchParams();
  if (state.metric) p.set("metric", state.metric);
  if (state.mode) p.set("mode", state.mode);
  p.set("x", state.x);
  return p;
}

async function load() {
  performance.mark("tf-fetch");
  const payload = await getJSON(`${api}?${params()}`);
  performance.mark("tf-data");
  apply(payload, true);
  draw();
  performance.mark("tf-drawn");
  // After the next frame: laid out and painted (what the benchmark calls "open").
  requestAnimationFrame(() => setTimeout(() => {
    if (!performance.getEntriesByName("tf-painted").length) performance.mark("tf-painted");
  }, 0));
  listen();
}

function listen() {
  if (stream) stream.close();
  const p = params();
  p.set("since", state.since);
  stream = new EventSource(`${api}/stream?${p}`);
  const status = $("status");
  stream.addEventListener("open", () => { status.textContent = "live"; status.className = "status live"; });
  stream.addEventListener("error", () => { status.textContent = "reconnecting…"; status.className = "status lost"; });
  stream.addEventListener("delta", (event) => {
    apply(JSON.parse(event.data), false);
    state.since = event.lastEventId;
    render();
  });
  stream.addEventListener("reset", () => load().catch(fail));
}

function fail(err) {
  showProblem(String(err.message || err));
  document.body.dataset.ready = "1";
  setTimeout(() => load().catch(fail), 3000); // the experiment may not be listed yet
}

function choose() {
  state.metric = $("metric").value || null;
  state.mode = $("mode").value;
  state.x = $("x").value || "training_iteration";
  history.replaceState(null, "", `${location.pathname}?${params()}`);
  load().catch(fail);
}

$("metric").addEventListener("change", () => { state.mode = null; $("mode").value = ""; choose(); });
$("mode").addEventListener("change", choose);
$("x").addEventListener("change", choose);
$("config-key").addEventListener("change", render);
$("state").addEventListener("change", () => { state.stateFilter = $("state").value; table.page = 0; render(); });
$("filter").addEventListener("input", () => { state.filter = $("filter").value; table.page = 0; render(); });
$("prev").addEventListener("click", () => { table.page -= 1; render(); });
$("next").addEventListener("click", () => { table.page += 1; render(); });
$("clear").addEventListener("click", () => { state.selected.clear(); render(); });
setInterval(() => state.summary && render(), 10000); // "updated N s ago" moves on

load().catch(fail);
