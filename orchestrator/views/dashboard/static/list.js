// The experiments page: every experiment under the storage root, refreshed every 2 s.
import { ago, bestText, el, getJSON, showProblem, stateChips, time } from "./common.js";

const REFRESH_MS = 2000;

function row(exp) {
  const href = `/experiments/${encodeURIComponent(exp.name)}`;
  let status;
  if (exp.problem) status = el("span", { class: "state ERROR", title: exp.problem, text: "damaged" });
  else if (exp.trials === 0) status = el("span", { class: "muted", text: "no trials yet" });
  else if (exp.running) status = el("span", { class: "state RUNNING", text: "running" });
  else status = el("span", { class: "muted", text: "finished" });
  const best = exp.metric ? (exp.best ? bestText(exp.best) : `${exp.metric}: none yet`) : "no metric set";
  return el("tr", { "data-experiment": exp.name },
    el("td", {}, el("a", { href, text: exp.name })),
    el("td", {}, exp.trials ? stateChips(exp.states) : el("span", { class: "muted", text: "0" })),
    el("td", { text: best }),
    el("td", { text: time(exp.started_at) }),
    el("td", { text: ago(exp.written_at), title: time(exp.written_at) }),
    el("td", { class: "wrap" }, status, exp.problem ? el("div", { class: "muted", text: exp.problem }) : null),
  );
}

async function refresh() {
  const status = document.getElementById("status");
  try {
    const data = await getJSON("/api/experiments");
    document.getElementById("root").textContent = data.root;
    showProblem(data.problem);
    const body = document.querySelector("#experiments tbody");
    body.replaceChildren(...data.experiments.map(row));
    document.getElementById("empty").hidden = data.experiments.length > 0;
    status.textContent = "live";
    status.className = "status live";
    document.body.dataset.ready = "1";
  } catch (err) {
    status.textContent = "server unreachable";
    status.className = "status lost";
    showProblem(String(err.message || err));
  }
  setTimeout(refresh, REFRESH_MS);
}

refresh();
