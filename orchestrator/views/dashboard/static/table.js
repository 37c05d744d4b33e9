// The trials table: one row per trial, every config key a column; sortable (click a
// header), filterable (text, key=value, key>number, key<number), rows selectable for
// the charts (click a row), PAGE_SIZE rows a page (laying out 1,000 rows took longer
// than everything else the page does).
import { el, fmt, numeric } from "./common.js";

export const PAGE_SIZE = 100;

const FIXED = [
  { key: "id", label: "trial" },
  { key: "state", label: "state" },
  { key: "iteration", label: "iter", num: true },
  { key: "value", label: "metric", num: true },
  { key: "failures", label: "failures", num: true },
];

function cellValue(row, key) {
  if (key.startsWith("config:")) return row.config[key.slice(7)];
  return row[key];
}

function compare(a, b) {
  const na = numeric(a), nb = numeric(b);
  if (na !== null && nb !== null) return na - nb;
  if (na !== null) return -1; // numbers before text and blanks
  if (nb !== null) return 1;
  if (a === undefined || a === null) return b === undefined || b === null ? 0 : 1;
  if (b === undefined || b === null) return -1;
  return String(a).localeCompare(String(b), undefined, { numeric: true });
}

/** A predicate for the filter box's text. */
export function parseFilter(text) {
  const tests = [];
  for (const word of text.trim().split(/\s+/).filter(Boolean)) {
    const m = word.match(/^([^=<>]+)(=|>|<)(.*)$/);
    if (m) {
      const [, key, op, want] = m;
      tests.push((row) => {
        const value = key === "id" || key === "state" || key === "error" ? row[key] :
          key in row.config ? row.config[key] : (key === "metric" ? row.value : row[key]);
        if (op === "=") return fmt(value) === want;
        const n = numeric(value), w = Number(want);
        return n !== null && !Number.isNaN(w) && (op === ">" ? n > w : n < w);
      });
    } else {
      const needle = word.toLowerCase();
      tests.push((row) => row.haystack.includes(needle));
    }
  }
  return (row) => tests.every((t) => t(row));
}

export class TrialsTable {
  constructor(table, { onSelect }) {
    this.table = table;
    this.onSelect = onSelect;
    this.sort = { key: null, dir: 1 };
    this.columnsKey = "";
    this.page = 0;
    this.pages = 1;
    table.querySelector("thead").addEventListener("click", (event) => {
      const th = event.target.closest("th");
      if (!th || !th.dataset.key) return;
      const key = th.dataset.key;
      this.sort = this.sort.key === key ? { key, dir: -this.sort.dir } : { key, dir: 1 };
      this.onSelect(null);
    });
    table.querySelector("tbody").addEventListener("click", (event) => {
      const tr = event.target.closest("tr[data-trial]");
      if (tr) this.onSelect(tr.dataset.trial);
    });
  }

  /** The rows the filter keeps, sorted as asked (default: the journal's order, or by
   * the metric, best first, when the page has an objective). */
  visible(state) {
    const keep = parseFilter(state.filter);
    const rows = [];
    for (const id of state.order) {
      const row = state.rows.get(id);
      if (!row) continue;
      if (row.haystack === undefined) row.haystack = haystack(row);
      if (state.stateFilter && row.state !== state.stateFilter) continue;
      if (keep(row)) rows.push(row);
    }
    const { key, dir } = this.sort;
    if (key) rows.sort((a, b) => dir * compare(cellValue(a, key), cellValue(b, key)));
    return rows;
  }

  render(state, rows) {
    const columns = [...FIXED, ...state.configKeys.map((k) => ({ key: `config:${k}`, label: k })),
      { key: "error", label: "error" }];
    const columnsKey = columns.map((c) => c.key).join("\u0000") + state.metric;
    if (columnsKey !== this.columnsKey || this.sortShown !== `${this.sort.key}${this.sort.dir}`) {
      this.columnsKey = columnsKey;
      this.sortShown = `${this.sort.key}${this.sort.dir}`;
      const head = el("tr");
      for (const c of columns) {
        const label = c.key === "value" ? (state.metric || "metric") : c.label;
        const sorted = this.sort.key === c.key ? (this.sort.dir > 0 ? "sorted-asc" : "sorted-desc") : null;
        head.append(el("th", { "data-key": c.key, class: sorted, text: label, title: `sort by ${label}` }));
      }
      this.table.querySelector("thead").replaceChildren(head);
    }
    // One string, parsed once: for 1,000 trials several times faster than an element
    // per cell.
    const best = state.best ? state.best.trial : null;
    const html = [];
    this.pages = Math.max(1, Math.ceil(rows.length / PAGE_SIZE));
    this.page = Math.min(this.page, this.pages - 1);
    const first = this.page * PAGE_SIZE;
    for (const row of rows.slice(first, first + PAGE_SIZE)) {
      const classes = `${state.selected.has(row.id) ? "selected" : ""} ${row.id === best ? "best" : ""}`.trim();
      html.push(`<tr data-trial="${esc(row.id)}"${classes ? ` class="${classes}"` : ""}>`);
      for (const c of columns) {
        if (c.key === "state") {
          html.push(`<td><span class="state ${esc(row.state)}">${esc(row.state)}</span></td>`);
        } else if (c.key === "error") {
          html.push(row.error
            ? `<td class="error" title="${esc(row.error)}">${esc(row.error.split("\n")[0])}</td>`
            : "<td></td>");
        } else if (c.key === "id") {
          html.push(`<td><span class="swatch" style="background:${state.colorOf(row.id)}"></span>${esc(row.id)}</td>`);
        } else {
          const value = cellValue(row, c.key);
          const num = c.num || typeof value === "number";
          html.push(`<td${num ? ' class="num"' : ""}>${esc(fmt(value))}</td>`);
        }
      }
      html.push("</tr>");
    }
    this.table.querySelector("tbody").innerHTML = html.join("");
  }
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** ``text`` safe inside HTML text and quoted attributes. */
export function esc(text) {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

function haystack(row) {
  const parts = [row.id, row.state, row.error || ""];
  for (const [key, value] of Object.entries(row.config)) parts.push(`${key}=${fmt(value)}`);
  return parts.join(" ").toLowerCase();
}
