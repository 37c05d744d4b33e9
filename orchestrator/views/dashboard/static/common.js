// What both pages share: fetching JSON, formatting numbers and times, small DOM helpers.

export const TERMINAL = new Set(["TERMINATED", "ERROR"]);

export async function getJSON(url) {
  const response = await fetch(url, { cache: "no-store" });
  let body = null;
  try {
    body = await response.json();
  } catch (err) {
    throw new Error(`${url}: the server answered ${response.status} without JSON`);
  }
  if (!response.ok) throw new Error(body && body.error ? body.error : `${url}: ${response.status}`);
  return body;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

/** A number as people read it: integers whole, others to 5 significant digits. */
export function fmt(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") {
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    if (abs !== 0 && (abs < 1e-4 || abs >= 1e7)) return value.toExponential(3).replace(/\.?0+e/, "e");
    return String(Number(value.toPrecision(5)));
  }
  if (typeof value === "object") return JSON.stringify(value);
  return String(value); // strings, and "NaN" / "Infinity" as the server spells them
}

/** A sortable number for a value (non-numbers and NaN: null). */
export function numeric(value) {
  if (typeof value === "number") return Number.isNaN(value) ? null : value;
  if (value === "Infinity") return Infinity;
  if (value === "-Infinity") return -Infinity;
  return null;
}

export function time(seconds) {
  if (!seconds) return "";
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function ago(seconds) {
  if (!seconds) return "";
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 172800) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}

export function stateChip(state, count) {
  return el("span", { class: `state ${state}`, text: count === undefined ? state : `${count} ${state}` });
}

export function stateChips(states) {
  const box = el("span", { class: "chips" });
  for (const [state, count] of Object.entries(states)) box.append(stateChip(state, count));
  return box;
}

/** Show ``text`` in the page's problem banner (none: hide it). */
export function showProblem(text) {
  const box = document.getElementById("problem");
  box.hidden = !text;
  box.textContent = text || "";
}

export function bestText(best) {
  if (!best) return "";
  return `${best.metric}=${fmt(best.value)} (${best.mode}, ${best.trial})`;
}

// A script error is shown on the page, not only in the console.
window.addEventListener("error", (event) => showProblem(`dashboard script error: ${event.message}`));
window.addEventListener("unhandledrejection", (event) =>
  showProblem(`dashboard error: ${event.reason && event.reason.message ? event.reason.message : event.reason}`));
