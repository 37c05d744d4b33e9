// PBT's lineage and the scheduler's stops, as tables (shown only when there are some).
import { el, fmt } from "./common.js";

function trialLink(id, select) {
  return el("a", { href: "#", text: id, onclick: (event) => { event.preventDefault(); select(id); } });
}

export function renderLineage(lineage, select) {
  const card = document.getElementById("lineage-card");
  card.hidden = !lineage.length;
  const rows = lineage.map((e) => el("tr", {},
    el("td", {}, trialLink(e.trial, select)),
    el("td", { class: "num", text: fmt(e.time) }),
    el("td", {}, trialLink(e.donor, select)),
    el("td", { class: "num", text: fmt(e.donor_iteration) }),
    el("td", { text: Object.entries(e.changes).map(([k, [a, b]]) => `${k}: ${fmt(a)} → ${fmt(b)}`).join(", ") || "–" }),
  ));
  document.querySelector("#lineage tbody").replaceChildren(...rows);
}

export function renderStops(stops, rungs, select) {
  const card = document.getElementById("stops-card");
  card.hidden = !stops.length && !rungs.length;
  const at = new Map();
  for (const s of stops) at.set(s.iteration, (at.get(s.iteration) || 0) + 1);
  const counts = [...at.entries()].sort((a, b) => a[0] - b[0]).map(([i, n]) => `${n} at ${fmt(i)}`);
  document.getElementById("rungs").textContent = [
    rungs.length ? `rungs (iterations, by bracket): ${rungs.map((b) => b.map(fmt).join(" · ")).join("  |  ")}` : "",
    counts.length ? `stopped: ${counts.join(", ")}` : "",
  ].filter(Boolean).join(" — ");
  const rows = stops.map((s) => el("tr", {},
    el("td", {}, trialLink(s.trial, select)),
    el("td", { class: "num", text: fmt(s.iteration) }),
    el("td", { text: s.by || "" }),
    el("td", { text: s.metric || "" }),
    el("td", { class: "num", text: fmt(s.value) }),
  ));
  document.querySelector("#stops tbody").replaceChildren(...rows);
}
