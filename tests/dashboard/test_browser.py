"""The dashboard in a real browser (headless Chromium) on a real, running experiment:
the trials table lists every trial, a chart renders, a result reported after the page
opened shows without a reload, a failed trial shows its error, and a damaged
experiment shows its message. With ``TRIALFLOW_SCREENSHOTS=<dir>`` the pages are
also saved there as PNGs.

Chromium is Debian's ``chromium`` package (``make test`` installs it when it can); the
test skips, saying so, only when there is none."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from orchestrator import Orchestrator
from orchestrator.core.journal_format import JOURNAL_KEY
from orchestrator.views.dashboard import running
from storage import LocalStorage

from ..support.journal_files import head_trials
from .cdp import Page, chromium_path, launched
from .gated import gated

pytestmark = [pytest.mark.usefixtures("ray_local"), pytest.mark.slow, pytest.mark.timeout(900)]

CPU = {"cpu": 0.25}
BEFORE, AFTER = 4, 3
#: Seconds for anything the page waits for on a loaded 2-core machine (events, not sleeps).
WAIT_S = 120.0
SHOTS = os.environ.get("TRIALFLOW_SCREENSHOTS")

ROWS = "[...document.querySelectorAll('#trials tbody tr[data-trial]')].map(r => r.dataset.trial)"
#: A config value that is HTML: the page must show it as text, never run it.
HOSTILE = '<img src=x onerror="window.pwned = 1">'
#: Pixels of the curves' canvas in a saturated colour: drawn series, not grid or axes.
DRAWN = """(() => {
  const c = document.querySelector('#curves canvas');
  if (!c) return 0;
  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
  let n = 0;
  for (let i = 0; i < d.length; i += 4) {
    const [r, g, b, a] = [d[i], d[i + 1], d[i + 2], d[i + 3]];
    if (a > 0 && Math.max(r, g, b) - Math.min(r, g, b) > 60) n++;
  }
  return n;
})()"""


def row(trial: str) -> str:
    return f"document.querySelector('#trials tr[data-trial=\"{trial}\"]')"


def cell(trial: str, column: int) -> str:
    return f"{row(trial)}.querySelector('td:nth-child({column})').textContent"


async def journaled(path: Path, counts: dict[str, int]) -> None:
    """Wait until the journal at ``path`` holds at least ``counts`` results per trial."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while loop.time() < deadline:
        try:
            have = {e["id"]: e.get("results_count", 0) for e in head_trials(path)}
            if all(have.get(t, 0) >= n for t, n in counts.items()):
                return
        except (OSError, ValueError, KeyError):
            pass
        await asyncio.sleep(0.1)
    raise AssertionError(f"the journal at {path} never held {counts}")


async def shot(page: Page, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        await page.screenshot(Path(SHOTS) / f"dashboard-{name}.png")


async def test_the_dashboard_in_a_real_browser(tmp_path: Path) -> None:
    executable = chromium_path()
    if executable is None:
        pytest.skip(
            "no chromium on PATH: install Debian's chromium (`make test` does, as root) "
            "to run the dashboard's browser test"
        )
    results = tmp_path / "results"
    gate = tmp_path / "gate"
    broken = results / "broken"
    broken.mkdir(parents=True)
    (broken / JOURNAL_KEY).write_text('{"format": 2, "name": "broken", "trials": [{"id": "a", "st')

    async with Orchestrator(storage=results, name="live", journal_interval=0.2) as orch:
        ids = [f"lr_{scale}" for scale in (1, 2, 3)]
        for trial_id, scale in zip(ids, (1, 2, 3), strict=True):
            config = {"before": BEFORE, "after": AFTER, "gate": str(gate), "scale": scale}
            config["note"] = HOSTILE
            # One result per call: a call that buffered results would hold the ones
            # before the gate until the gate opens.
            orch.add_trial(gated, config, resources=CPU, trial_id=trial_id, result_buffer=1)
        orch.add_trial(
            gated,
            {"before": 2, "after": 0, "gate": "", "fail": True},
            resources=CPU,
            trial_id="fails",
            result_buffer=1,
        )
        run = asyncio.get_running_loop().create_task(orch.run())
        try:
            await journaled(results / "live", {**dict.fromkeys(ids, BEFORE), "fails": 2})
            async with (
                running(LocalStorage(str(results)), port=0) as served,
                launched(executable) as browser,
            ):
                page = await browser.new_page(1400, 1000)
                await check_pages(page, f"http://127.0.0.1:{served.port}", ids, gate)
                assert page.errors == [], page.errors
        finally:
            gate.touch()
            trials = await asyncio.wait_for(run, WAIT_S)
    assert [t.state.value for t in trials] == ["TERMINATED"] * 3 + ["ERROR"]


async def check_pages(page: Page, base: str, ids: list[str], gate: Path) -> None:
    await page.goto(f"{base}/experiments/live")
    await page.wait_for("document.body.dataset.ready === '1'", WAIT_S, "the page's first draw")

    # The trials table lists every trial; the failed one with its error.
    shown: list[str] = await page.wait_for(f"{ROWS}.length === 4 && {ROWS}", WAIT_S, "4 rows")
    assert sorted(shown) == sorted([*ids, "fails"])
    error = await page.wait_for(
        f"{cell('fails', 2)} === 'ERROR' && {row('fails')}.querySelector('td.error').title",
        WAIT_S,
        "the failed trial's error",
    )
    assert "ValueError: the loss diverged (scale 1.0)" in error
    # Text from the journal is text: an HTML config value is shown, not run.
    texts = await page.evaluate(
        f"[...{row(ids[0])}.querySelectorAll('td')].map(c => c.textContent)"
    )
    assert HOSTILE in texts
    assert await page.evaluate("document.querySelectorAll('#trials img').length") == 0
    assert await page.evaluate("window.pwned === undefined")

    # A chart renders: the curves of every trial, drawn on its canvas.
    points = int(
        await page.wait_for("Number(document.querySelector('#curves').dataset.points)", WAIT_S)
    )
    assert points == BEFORE * 3 + 2
    assert await page.wait_for(f"{DRAWN} > 200", WAIT_S, "coloured curves on the canvas")
    assert await page.evaluate("Number(document.querySelector('#scatter').dataset.points)") == 4
    await shot(page, "experiment")

    # A result reported after the page opened appears without a reload.
    await page.evaluate("window.stillTheSamePage = true")
    assert await page.evaluate(cell(ids[0], 3)) == str(BEFORE)
    gate.touch()
    await page.wait_for(
        f"{cell(ids[0], 3)} === '{BEFORE + AFTER}' && "
        f"Number(document.querySelector('#curves').dataset.points) === {(BEFORE + AFTER) * 3 + 2}",
        WAIT_S,
        "the new results in the table and the chart",
    )
    assert await page.evaluate("window.stillTheSamePage === true")
    assert await page.evaluate("performance.getEntriesByType('navigation').length") == 1

    # No sweep ranks a metric here: no trial is called best until a mode is chosen.
    best = "document.getElementById('best').textContent"
    assert "choose max or min" in await page.wait_for(best, WAIT_S, "why no trial is best")
    await page.evaluate(
        "(() => { const m = document.getElementById('mode'); m.value = 'min';"
        " m.dispatchEvent(new Event('change')); })()"
    )
    shown = await page.wait_for(
        f"{best}.startsWith('best trial so far') && {best}", WAIT_S, "the best trial by min"
    )
    assert "(min, " in shown

    # A damaged experiment shows its message.
    await page.goto(f"{base}/experiments/broken")
    problem: Any = await page.wait_for(
        "!document.getElementById('problem').hidden"
        " && document.getElementById('problem').textContent",
        WAIT_S,
        "the damaged experiment's message",
    )
    assert "damaged" in problem and "truncated" in problem and JOURNAL_KEY in problem
    await shot(page, "damaged")

    # The experiments page lists both, the damaged one marked.
    await page.goto(base + "/")
    listed = await page.wait_for(
        "[...document.querySelectorAll('#experiments tr[data-experiment]')]"
        ".map(r => r.dataset.experiment + ':' + r.textContent)",
        WAIT_S,
    )
    assert len(listed) == 2 and "damaged" in listed[0] and listed[1].startswith("live:")
    await shot(page, "experiments")
