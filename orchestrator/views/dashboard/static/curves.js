// Curves of the chosen metric against the chosen x, one line per trial, with uPlot.
// uPlot wants one x array shared by every series, so each trial's points are placed on
// the union of the x values (beyond MAX_X distinct values, on a grid of MAX_X steps:
// finer than any screen shows). A trial without a value at an x is a gap, spanned.
import { fmt } from "./common.js";

const MAX_X = 2000;
// Tick steps for an axis of whole numbers (iterations): never 1.5.
const INTEGER_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

/** ``[xs, ...ys]`` for uPlot from each trial's points (``{x: [], y: []}``). */
export function align(ids, points) {
  let lo = Infinity, hi = -Infinity;
  const seen = new Set();
  for (const id of ids) {
    const p = points.get(id);
    if (!p) continue;
    for (const v of p.x) {
      if (v === null) continue;
      seen.add(v);
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
  }
  let xs, slot;
  if (seen.size <= MAX_X) {
    xs = Float64Array.from(seen).sort();
    const index = new Map();
    xs.forEach((v, i) => index.set(v, i));
    slot = (v) => index.get(v);
  } else {
    const step = (hi - lo) / MAX_X;
    xs = Float64Array.from({ length: MAX_X + 1 }, (_, i) => lo + i * step);
    slot = (v) => Math.round((v - lo) / step);
  }
  const data = [Array.from(xs)];
  let count = 0;
  for (const id of ids) {
    const ys = new Array(xs.length).fill(null);
    const p = points.get(id);
    if (p) {
      for (let i = 0; i < p.x.length; i++) {
        const x = p.x[i], y = p.y[i];
        if (x !== null && y !== null) {
          ys[slot(x)] = y;
          count++;
        }
      }
    }
    data.push(ys);
  }
  return { data, count };
}

export class Curves {
  constructor(box, hover) {
    this.box = box;
    this.hover = hover;
    this.chart = null;
    this.shape = "";
    this.ids = [];
    this.rungs = [];
    this.focused = null;
    // The width as the observer last saw it: reading clientWidth while drawing would
    // force a layout of the whole page (a 1,000-row table) first.
    this.width = box.clientWidth;
    new ResizeObserver((entries) => {
      this.width = entries[entries.length - 1].contentRect.width;
      if (this.chart) this.chart.setSize(this.size());
    }).observe(box);
  }

  size() {
    return { width: Math.max(300, this.width), height: 320 };
  }

  /** Draw ``ids``' points (``state.points``) of ``state.metric`` against ``state.x``. */
  update(state, ids) {
    const best = state.best ? state.best.trial : null;
    const shape = [state.metric, state.x, best, ...ids].join("\u0000");
    if (this.chart && shape === this.shape && state.version === this.version) return; // as drawn
    this.version = state.version;
    const { data, count } = align(ids, state.points);
    this.box.dataset.series = String(ids.length);
    this.box.dataset.points = String(count);
    if (!count) {
      this.destroy();
      const what = state.metric ? `no trial has reported ${state.metric} yet` : "no metric reported yet";
      this.box.replaceChildren(Object.assign(document.createElement("div"), { className: "empty", textContent: what }));
      return;
    }
    this.rungs = state.x === "training_iteration" ? [...new Set(state.rungs.flat())] : [];
    if (this.chart && shape === this.shape) {
      this.chart.setData(data);
      return;
    }
    this.destroy();
    this.box.replaceChildren();
    this.shape = shape;
    this.ids = ids;
    const many = ids.length > 30;
    const series = [{ label: state.x }];
    for (const id of ids) {
      series.push({
        label: id,
        stroke: state.colorOf(id),
        width: id === best ? 2.5 : (many ? 1 : 1.5),
        spanGaps: true,
        points: { show: false },
      });
    }
    this.chart = new uPlot({
      ...this.size(),
      legend: { show: false },
      scales: { x: { time: false } },
      axes: [
        { label: state.x, incrs: state.x === "training_iteration" ? INTEGER_STEPS : undefined },
        { label: state.metric },
      ],
      // No hover dot per series: with 1,000 trials that is 1,000 elements moved per mouse move.
      cursor: { focus: { prox: 24 }, drag: { x: true, y: false }, points: { show: false } },
      focus: { alpha: 0.25 },
      series,
      hooks: {
        setCursor: [(u) => this.showHover(u, state)],
        setSeries: [(u, index, opts) => {
          if (opts && "focus" in opts) this.focused = index;
          this.showHover(u, state);
        }],
        draw: [(u) => this.drawRungs(u)],
      },
    }, data, this.box);
  }

  showHover(u, state) {
    const idx = u.cursor.idx;
    const focused = this.focused;
    if (idx === null || idx === undefined || !focused) {
      this.hover.textContent = "";
      return;
    }
    const id = this.ids[focused - 1];
    const y = u.data[focused][idx];
    this.hover.textContent = `${id}: ${state.metric}=${y === null ? "–" : fmt(y)} at ${state.x}=${fmt(u.data[0][idx])}`;
  }

  drawRungs(u) {
    if (!this.rungs.length) return;
    const ctx = u.ctx;
    ctx.save();
    ctx.strokeStyle = "rgba(120,120,140,0.55)";
    ctx.setLineDash([4, 4]);
    ctx.lineWidth = 1;
    for (const rung of this.rungs) {
      const x = Math.round(u.valToPos(rung, "x", true));
      if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) continue;
      ctx.beginPath();
      ctx.moveTo(x, u.bbox.top);
      ctx.lineTo(x, u.bbox.top + u.bbox.height);
      ctx.stroke();
    }
    ctx.restore();
  }

  destroy() {
    if (this.chart) this.chart.destroy();
    this.chart = null;
    this.shape = "";
  }
}
