// The trials table: one row per trial, every config key a column; sortable (click a
// header), filterable (text, key=value, key>number, key<number), rows selectable for
// the charts (click a row). Rebuilt in one pass: 1,000 trials render in a few ms.
import { el, fmt, numeric, stateChip } from "./common.js";

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
    const best = state.best ? state.best.trial : null;
    const body = document.createDocumentFragment();
    for (const row of rows) {
      const classes = [state.selected.has(row.id) ? "selected" : "", row.id === best ? "best" : ""];
      const tr = el("tr", { "data-trial": row.id, class: classes.join(" ").trim() || null });
      for (const c of columns) {
        if (c.key === "state") {
          tr.append(el("td", {}, stateChip(row.state)));
        } else if (c.key === "error") {
          tr.append(el("td", { class: row.error ? "error" : null, title: row.error || null,
            text: row.error ? row.error.split("\n")[0] : "" }));
        } else if (c.key === "id") {
          tr.append(el("td", {}, el("span", { class: "swatch", style: `background:${state.colorOf(row.id)}` }), row.id));
        } else {
          const value = cellValue(row, c.key);
          tr.append(el("td", { class: c.num || typeof value === "number" ? "num" : null, text: fmt(value) }));
        }
      }
      body.append(tr);
    }
    this.table.querySelector("tbody").replaceChildren(body);
  }
}

function haystack(row) {
  const parts = [row.id, row.state, row.error || ""];
  for (const [key, value] of Object.entries(row.config)) parts.push(`${key}=${fmt(value)}`);
  return parts.join(" ").toLowerCase();
}
