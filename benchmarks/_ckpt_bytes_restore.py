"""``bench_checkpoint_bytes --restore-only``: restores and saves alone, at the storage
level (no Ray), ours against today's full copies, paired in time.

Why a mode of its own: in the Ray run a restore is one of a few per run and shares
the machine with the workload's trials; its ratio wanders 0.9-1.1 with the load, so it
can neither show nor refute a 5% target. Here each storage (local directory, S3 on the
emulator) holds the PBT workload's checkpoints twice, content-addressed (ours) and as
full copies (``TRIALFLOW_CHECKPOINT_DEDUP=0``: today's), saved the way a trial actor
saves them (``ActorIO.persist``, each save following the one before). Then ``--pairs``
rounds, each restoring one checkpoint of each layout the way a trial actor restores
(``ActorIO.fetch``: its own I/O loop thread, the checkpoint fetched, verified and
assembled in a fresh directory) three ways back to back, in an order that turns every
round, so the three meet the same load: ours, ours without the node's copies of chunks
(``TRIALFLOW_BLOB_CACHE=off``: a node that never held them, so on S3 every chunk is
fetched; on a local disk the same as ours) and today's. A round also saves one new
checkpoint each way (ours and today's, the order flipping), timed the same way. The
node's copies start empty in a directory of the run; the saves fill them, as a node's
trials would.

Reported per storage and layout: each side's median, quartiles and [min-max]; the
median of the pairs' ratios with its 95% confidence interval (distribution-free: order
statistics of the paired ratios, a sign-test interval), which is what shows a ratio
below 1.05 or not; the load average over the rounds; and, on S3, the requests each
restore made and the new connections they opened (the counting emulator's log).
``--keepalive`` serves the emulator with keep-alive connections (gunicorn), as S3
does, instead of moto's own server, which closes each connection after one response.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import statistics
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from ._ckpt_bytes_common import write_safetensors
from ._restore_common import AWS_ENV, BUCKET

#: Today's switch (see ``storage.dedup``).
DEDUP_ENV = "TRIALFLOW_CHECKPOINT_DEDUP"
SIDES = ("ours", "today")
#: Restores in a round: ours, ours without the node's copies of chunks (a node that
#: never held them: on S3 every chunk fetched), today's.
RESTORES = ("ours", "cold", "today")
CACHE_ENV = "TRIALFLOW_BLOB_CACHE"


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class _Side:
    """One side (ours or today) on one storage: its actor I/O and its checkpoints."""

    def __init__(self, name: str, uri: str, options: dict[str, Any], work: str) -> None:
        from orchestrator.actor.io import ActorIO

        self.name = name
        self.io = ActorIO(uri, options)
        self.work = work
        self.keys: dict[str, list[str]] = {}  # layout -> checkpoint keys, oldest first
        self.count = 0

    def save(self, layout: str, frozen: bytes, head_size: int) -> float:
        """One more checkpoint of ``layout`` (the frozen part unchanged, a new head),
        saved as a trial actor saves it; seconds the save took."""
        self.count += 1
        local = os.path.join(self.work, f"{self.name}-save-{self.count}")
        os.makedirs(local)
        head = ("head", os.urandom(head_size))
        if layout == "one":
            write_safetensors(
                os.path.join(local, "model.safetensors"), [("backbone", frozen), head]
            )
        else:
            write_safetensors(os.path.join(local, "frozen.safetensors"), [("backbone", frozen)])
            write_safetensors(os.path.join(local, "changing.safetensors"), [head])
        with open(os.path.join(local, "trainer_state.json"), "w") as fh:
            fh.write(f'{{"iteration": {self.count}, "lr": 0.01, "score": 1.0}}')
        keys = self.keys.setdefault(layout, [])
        key = f"trial_{layout}/checkpoint_{self.count:06d}"
        env = {DEDUP_ENV: "1" if self.name == "ours" else "0"}
        with _env(env):
            t = time.perf_counter()
            self.io.persist("bench", local, key, retry_for=0.0, follows=tuple(keys[-1:]))
            took = time.perf_counter() - t
        keys.append(key)
        return took

    def restore(self, layout: str, index: int) -> float:
        """Restore the ``index``-th checkpoint of ``layout`` (cycling) as a trial actor
        does; seconds from the call to the verified directory."""
        keys = self.keys[layout]
        target = os.path.join(self.work, f"{self.name}-restore")
        t = time.perf_counter()
        self.io.fetch(keys[index % len(keys)], target)
        took = time.perf_counter() - t
        shutil.rmtree(target, ignore_errors=True)
        return took

    def close(self) -> None:
        self.io.close()


def quartiles(values: Sequence[float]) -> dict[str, float | None]:
    """Median, quartiles and range of ``values``."""
    if not values:
        return {"median": None, "q1": None, "q3": None, "min": None, "max": None, "n": 0}
    s = sorted(values)
    q = statistics.quantiles(s, n=4, method="inclusive") if len(s) > 1 else [s[0]] * 3
    return {"median": q[1], "q1": q[0], "q3": q[2], "min": s[0], "max": s[-1], "n": len(s)}


def median_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of ``values``: the order
    statistics ``(k, n+1-k)`` whose binomial(n, 1/2) coverage is at least ``level``
    (the sign test's interval). None for too few values (n < 6 at 95%)."""
    s = sorted(values)
    n = len(s)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1.0 - 2.0 * sum(math.comb(n, i) for i in range(k)) / 2.0**n
        if coverage >= level:
            best = k
        else:
            break
    return None if best is None else (s[best - 1], s[n - best])


def run(args: argparse.Namespace, url: str, work: str) -> list[dict[str, Any]]:
    """Every storage's rounds; one dict per (storage, layout, round)."""
    frozen = os.urandom(args.frozen)
    rows: list[dict[str, Any]] = []
    for storage in args.storages:
        sides: dict[str, _Side] = {}
        prefix = f"restore-{uuid.uuid4().hex[:8]}"
        try:
            for name in SIDES:
                if storage == "local":
                    root = os.path.join(work, f"{name}-root")
                    os.makedirs(root)
                    uri, options = root, {}
                else:
                    uri, options = f"s3://{BUCKET}/{prefix}/{name}", {"endpoint_url": url}
                sides[name] = _Side(name, uri, options, work)
            with _env(AWS_ENV):
                for layout in args.layouts:  # the workload's newest checkpoints
                    for _ in range(args.checkpoints):
                        for name in SIDES:
                            sides[name].save(layout, frozen, args.head)
                for i in range(args.pairs):
                    order = SIDES if i % 2 == 0 else SIDES[::-1]
                    turn = RESTORES[i % 3 :] + RESTORES[: i % 3]
                    for layout in args.layouts:
                        row: dict[str, Any] = {
                            "storage": storage,
                            "layout": layout,
                            "round": i,
                            "load": os.getloadavg()[0],
                        }
                        for name in turn:
                            side = sides["today" if name == "today" else "ours"]
                            before = _log_size(args.request_log)
                            with _env({CACHE_ENV: "off"} if name == "cold" else {}):
                                row[f"{name}_restore_s"] = side.restore(layout, i)
                            requests, connections = _served(args.request_log, before)
                            row[f"{name}_requests"] = requests
                            row[f"{name}_connections"] = connections
                        for name in order:
                            row[f"{name}_save_s"] = sides[name].save(layout, frozen, args.head)
                        rows.append(row)
                    _progress(storage, i, args.pairs, rows)
        finally:
            for side in sides.values():
                side.close()
            if storage == "local":
                for name in SIDES:
                    shutil.rmtree(os.path.join(work, f"{name}-root"), ignore_errors=True)
            else:
                from .bench_restore import _empty_prefix

                _empty_prefix(url, prefix)
    return rows


def _log_size(log: Path | None) -> int:
    return log.stat().st_size if log is not None and log.exists() else 0


def _served(log: Path | None, offset: int) -> tuple[int, int]:
    """Requests the emulator served since ``offset`` of its request log, and the new
    connections they opened (client ports not seen before); (0, 0) without the log."""
    if log is None or not log.exists():
        return 0, 0
    with open(log, "rb") as fh:
        before = fh.read(offset).decode().splitlines()
        lines = fh.read().decode().splitlines()
    seen = {line.rsplit("\t", 1)[-1] for line in before}
    return len(lines), len({line.rsplit("\t", 1)[-1] for line in lines} - seen)


def _progress(storage: str, i: int, pairs: int, rows: list[dict[str, Any]]) -> None:
    if (i + 1) % 10 and i + 1 != pairs:
        return
    mine = [r for r in rows if r["storage"] == storage]
    ratios = [r["ours_restore_s"] / r["today_restore_s"] for r in mine]
    cold = [r["cold_restore_s"] / r["today_restore_s"] for r in mine]
    print(
        f"  {storage}: {i + 1}/{pairs} rounds, restore / today so far: ours "
        f"{statistics.median(ratios):.3f}, without node copies {statistics.median(cold):.3f}, "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cells = sorted({(r["storage"], r["layout"]) for r in rows})
    for storage, layout in cells:
        mine = [r for r in rows if (r["storage"], r["layout"]) == (storage, layout)]
        cell: dict[str, Any] = {"pairs": len(mine), "load": quartiles([r["load"] for r in mine])}
        for what, mine_name in (("restore", "ours"), ("cold", "cold"), ("save", "ours")):
            key = "save" if what == "save" else "restore"
            ours = [r[f"{mine_name}_{key}_s"] for r in mine]
            today = [r[f"today_{key}_s"] for r in mine]
            ratios = [a / b for a, b in zip(ours, today, strict=True) if b > 0]
            cell[what] = {
                "ours": quartiles(ours),
                "today": quartiles(today),
                "ratio_of_medians": statistics.median(ours) / statistics.median(today),
                "paired_ratio": quartiles(ratios),
                "paired_ratio_ci95": median_ci(ratios),
            }
        for what in ("requests", "connections"):
            cell[what] = {
                name: statistics.median([r[f"{name}_{what}"] for r in mine]) for name in RESTORES
            }
        out[f"{storage}/{layout}"] = cell
    return out


def print_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    from .bench_restore import fmt_size

    print()
    print(
        f"Restore alone (ActorIO.fetch, no Ray) and save alone (ActorIO.persist): PBT model, "
        f"frozen {fmt_size(args.frozen)} + head {fmt_size(args.head)}; {args.checkpoints} "
        f"checkpoints each way, then {args.pairs} rounds (ours and today's back to back, "
        f"order flipping). Seconds: median [q1-q3] (min-max); ratio: median of the "
        f"paired ratios, 95% CI."
    )
    for name, cell in summary.items():
        load = cell["load"]
        print(
            f"{name}: {cell['pairs']} pairs, load {load['median']:.1f} "
            f"[{load['min']:.1f}-{load['max']:.1f}], requests (new connections) a restore: "
            f"ours {_rc(cell, 'ours')}, without node copies {_rc(cell, 'cold')}, today "
            f"{_rc(cell, 'today')}"
        )
        for what in ("restore", "cold", "save"):
            c = cell[what]
            ci = c["paired_ratio_ci95"]
            ci_text = "-" if ci is None else f"[{ci[0]:.3f}, {ci[1]:.3f}]"
            verdict = "" if ci is None else ("  <= 1.05: shown" if ci[1] <= 1.05 else "")
            print(
                f"  {_LABEL[what]:<12} ours {_q(c['ours'])}  today {_q(c['today'])}  ours/today "
                f"{c['paired_ratio']['median']:.3f} CI {ci_text} (ratio of medians "
                f"{c['ratio_of_medians']:.3f}){verdict}"
            )


def _rc(cell: dict[str, Any], name: str) -> str:
    return f"{cell['requests'][name]:g} ({cell['connections'][name]:g})"


_LABEL = {"restore": "restore", "cold": "restore cold", "save": "save"}


def _q(q: dict[str, float | None]) -> str:
    return f"{q['median']:.3f} [{q['q1']:.3f}-{q['q3']:.3f}] ({q['min']:.3f}-{q['max']:.3f})"


def main(args: argparse.Namespace) -> int:
    from ._shared import write_figures

    print(
        f"restore only: load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
        f"on {os.cpu_count()} CPUs",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-ckpt-restore-") as work:
        # The node's copies of chunks (storage.blob_cache) start empty, here, each run.
        os.environ["TRIALFLOW_BLOB_CACHE"] = os.path.join(work, "node-blobs")
        with contextlib.ExitStack() as stack:
            url = ""
            args.request_log = None
            if "s3" in args.storages:
                from .bench_checkpoint_bytes import counting_moto

                log_path = Path(work, "stored.log")
                args.request_log = Path(work, "requests.log")
                url = stack.enter_context(
                    counting_moto(log_path, args.request_log, keepalive=args.keepalive)
                )
            rows = run(args, url, work)
    summary = summarize(rows)
    print_summary(args, summary)
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    out = args.out.with_name(args.out.stem + "_restore_only.json")
    write_figures(out, "checkpoint_bytes_restore_only", vars(args), summary, rows)
    print(f"figures written to {out}")
    return 0
