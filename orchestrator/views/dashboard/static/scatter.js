// Config against the metric: one point per trial (its value of the metric against one
// config key), as Optuna's slice plot. Text and boolean values are categories on the
// x axis; a positive key spanning two decades or more is drawn on a log scale.
import { fmt, numeric } from "./common.js";

export class Scatter {
  constructor(box, hover, note) {
    this.box = box;
    this.hover = hover;
    this.note = note;
    this.chart = null;
    this.ids = [];
    // The width as the observer last saw it: reading clientWidth while drawing would
    // force a layout of the whole page (a 1,000-row table) first.
    this.width = box.clientWidth;
    new ResizeObserver((entries) => {
      this.width = entries[entries.length - 1].contentRect.width;
      if (this.chart) this.chart.setSize(this.size());
    }).observe(box);
  }

  size() {
    return { width: Math.max(300, this.width), height: 260 };
  }

  update(state, rows, key) {
    const shape = [state.version, state.metric, key, ...rows.map((r) => r.id).sort()].join("\u0000");
    if (shape === this.shape) return; // as drawn
    this.shape = shape;
    this.destroy();
    this.box.replaceChildren();
    if (!key || !state.metric) return this.empty("no config key or metric to show");
    const raw = [];
    for (const row of rows) {
      const y = numeric(row.value);
      if (y === null || !Number.isFinite(y) || !(key in row.config)) continue;
      raw.push([row.config[key], y, row.id]);
    }
    if (!raw.length) return this.empty(`no trial has both ${key} and a value of ${state.metric}`);
    const categorical = raw.some(([v]) => typeof v !== "number");
    let labels = null;
    let points;
    if (categorical) {
      labels = [...new Set(raw.map(([v]) => fmt(v)))].sort();
      const at = new Map(labels.map((l, i) => [l, i]));
      points = raw.map(([v, y, id]) => [at.get(fmt(v)), y, id]);
    } else {
      points = raw;
    }
    points.sort((a, b) => a[0] - b[0]);
    const xs = points.map((p) => p[0]);
    const positive = !categorical && xs[0] > 0;
    const log = positive && xs[xs.length - 1] / xs[0] >= 100;
    this.ids = points.map((p) => p[2]);
    this.box.dataset.points = String(points.length);
    this.note.textContent = `${points.length} trial(s)${log ? ", log scale" : ""}`;
    const best = state.best ? state.best.trial : null;
    const xAxis = { label: key, values: (u, splits) => splits.map((v) => (v === null ? "" : fmt(v))) };
    if (labels) {
      xAxis.values = (u, splits) => splits.map((v) => (Number.isInteger(v) && labels[v] !== undefined ? labels[v] : ""));
      xAxis.splits = () => labels.map((_, i) => i);
    }
    this.chart = new uPlot({
      ...this.size(),
      legend: { show: false },
      scales: {
        x: {
          time: false,
          distr: log ? 3 : 1,
          range: labels ? [-0.5, labels.length - 0.5] : undefined,
        },
      },
      axes: [xAxis, { label: state.metric }],
      cursor: { drag: { x: false, y: false }, points: { size: 10 } },
      series: [
        {},
        {
          label: state.metric,
          stroke: "#2f6fde",
          paths: () => null,
          points: { show: true, size: 7, fill: "rgba(47,111,222,0.55)", stroke: "#2f6fde" },
        },
      ],
      hooks: {
        setCursor: [(u) => {
          const idx = u.cursor.idx;
          if (idx === null || idx === undefined) {
            this.hover.textContent = "";
            return;
          }
          const raw = points[idx];
          const shown = labels ? labels[raw[0]] : fmt(raw[0]);
          this.hover.textContent = `${raw[2]}${raw[2] === best ? " (best)" : ""}: ${key}=${shown}, ${state.metric}=${fmt(raw[1])}`;
        }],
      },
    }, [xs, points.map((p) => p[1])], this.box);
  }

  empty(text) {
    this.box.dataset.points = "0";
    this.note.textContent = "";
    this.box.replaceChildren(Object.assign(document.createElement("div"), { className: "empty", textContent: text }));
  }

  destroy() {
    if (this.chart) this.chart.destroy();
    this.chart = null;
  }
}
