"""``bench_checkpoint_bytes``'s summary (medians per system and cell, ratios against the
targets) and its printed tables."""

from __future__ import annotations

import argparse
from typing import Any

from ._sweep_common import fmt, fmt_spread, ratio, spread, verdict

#: Issue 36's targets: bytes written, ours / today's and ours / Tune's.
BYTES_TARGET = {"pbt": 0.35, "finetune": 0.20}
#: Save and restore latency, ours / today's.
LATENCY_TARGET = 1.05
MIB = 1 << 20


def _cells(runs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []
    for r in runs:
        s = r["spec"]
        cell = (s["workload"], s["layout"], s["storage"])
        if cell not in seen:
            seen.append(cell)
    return seen


def summarize(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    rows: dict[str, dict[str, Any]] = {}
    ratios: dict[str, dict[str, Any]] = {}
    for cell in _cells(runs):
        name = "/".join(cell)
        for system in args.systems:
            mine = [
                r
                for r in runs
                if (r["spec"]["workload"], r["spec"]["layout"], r["spec"]["storage"]) == cell
                and r["spec"]["system"] == system
            ]
            if not mine:
                continue
            ok = [r for r in mine if r.get("ok")]

            def per_run(key: str, scale: float = 1.0, ok: list[dict[str, Any]] = ok) -> Any:
                return spread([r[key] / scale if r.get(key) is not None else None for r in ok])

            def pooled(key: str, ok: list[dict[str, Any]] = ok) -> Any:
                return spread([v for r in ok for v in r.get(key) or []])

            rows[f"{name}/{system}"] = {
                "cell": list(cell),
                "system": system,
                "runs": len(mine),
                "ok": len(ok) == len(mine),
                "errors": [r.get("error") or r.get("errors") for r in mine if not r.get("ok")],
                "mib_written": per_run("bytes_written", MIB),
                "ckpt_mib_written": per_run("checkpoint_bytes_written", MIB),
                "mib_held": per_run("bytes_held", MIB),
                "mib_per_checkpoint": spread(
                    [
                        r["bytes_written"] / MIB / r["checkpoints_persisted"]
                        if r.get("bytes_written") is not None and r.get("checkpoints_persisted")
                        else None
                        for r in ok
                    ]
                ),
                "checkpoints": per_run("checkpoints_persisted"),
                "exploits": per_run("exploits"),
                "save_s": pooled("save_s"),
                "probe_save_s": pooled("probe_save_s"),
                "restore_s": pooled("restore_s"),
                "restore_fetch_s": pooled("restore_fetch_s"),
                "restore_load_s": pooled("restore_load_s"),
                "run_s": per_run("run_s"),
                "dedup_env_in_workers": sorted(
                    {e for r in ok for e in r.get("dedup_env_in_workers") or []}
                ),
            }
        row = {s: rows.get(f"{name}/{s}") for s in ("ours", "today", "tune")}

        def med(system: str, key: str, row: dict[str, Any] = row) -> float | None:
            r = row.get(system)
            return None if r is None else r[key]["median"]

        ratios[name] = {
            "bytes_vs_today": ratio(med("ours", "mib_written"), med("today", "mib_written")),
            "bytes_vs_tune": ratio(med("ours", "mib_written"), med("tune", "mib_written")),
            "ckpt_bytes_vs_today": ratio(
                med("ours", "ckpt_mib_written"), med("today", "ckpt_mib_written")
            ),
            "ckpt_bytes_vs_tune": ratio(
                med("ours", "ckpt_mib_written"), med("tune", "ckpt_mib_written")
            ),
            "per_checkpoint_vs_today": ratio(
                med("ours", "mib_per_checkpoint"), med("today", "mib_per_checkpoint")
            ),
            "per_checkpoint_vs_tune": ratio(
                med("ours", "mib_per_checkpoint"), med("tune", "mib_per_checkpoint")
            ),
            "save_vs_today": ratio(med("ours", "save_s"), med("today", "save_s")),
            "probe_save_vs_today": ratio(med("ours", "probe_save_s"), med("today", "probe_save_s")),
            "restore_vs_today": ratio(med("ours", "restore_s"), med("today", "restore_s")),
            "bytes_target": BYTES_TARGET[cell[0]],
        }
    return {"rows": rows, "ratios": ratios}


def print_report(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    from .bench_restore import fmt_size

    print()
    print(
        f"PBT: {args.trials} trials x {args.pbt_iterations} iterations, frozen "
        f"{fmt_size(args.frozen)} + head {fmt_size(args.head)}, perturbation every "
        f"{args.interval}; fine-tuning: {args.trials} trials x {args.ft_iterations} "
        f"iterations, base {fmt_size(args.base)} + adapter {fmt_size(args.adapter)}; a "
        f"checkpoint every iteration, all kept; {args.cpu:g} CPU a trial, step "
        f"{args.step_s:g} s; {args.repeat} run(s) each"
    )
    print(
        "written = bytes stored by the run (S3: every object the emulator stored; local: "
        "every file version, each inode once), /ckpt = written / checkpoints; ckpt = "
        "checkpoint files and blobs only; held = at the end.\nsave = save_checkpoint start "
        "-> the driver's on_checkpoint hook, in the workload (all trials at once) and alone "
        "(the probe trial); restore = Trial.restore() call -> return (the probe).\n"
        "Bytes: median [min-max] over runs; latencies: median [min-max] over every "
        "checkpoint / restore of every run."
    )
    head = (
        f"{'workload/layout/storage':<24} {'system':<9} {'written MiB':>12} {'/ckpt':>6} "
        f"{'ckpt MiB':>9} {'held MiB':>9} {'ckpts':>5} {'expl':>4} "
        f"{'save s (workload)':>19} {'save s (alone)':>17} {'restore s':>17} {'run s':>6}"
    )
    print(head)
    print("-" * len(head))
    for row in summary["rows"].values():
        cell = "/".join(row["cell"])
        flag = "" if row["ok"] else "  FAILED"
        print(
            f"{cell:<24} {row['system']:<9} "
            f"{fmt_spread(row['mib_written'], ',.0f'):>12} "
            f"{fmt(row['mib_per_checkpoint']['median'], '.1f'):>6} "
            f"{fmt(row['ckpt_mib_written']['median'], ',.0f'):>9} "
            f"{fmt(row['mib_held']['median'], ',.0f'):>9} "
            f"{fmt(row['checkpoints']['median'], '.0f'):>5} "
            f"{fmt(row['exploits']['median'], '.0f'):>4} "
            f"{fmt_spread(row['save_s'], '.2f'):>19} "
            f"{fmt_spread(row['probe_save_s'], '.2f'):>17} "
            f"{fmt_spread(row['restore_s'], '.2f'):>17} "
            f"{fmt(row['run_s']['median'], '.1f'):>6}{flag}"
        )
        for error in row["errors"]:
            print(f"    error: {str(error)[:300]}")
    print()
    print("ratios (medians), ours against today's full copies and against Ray Tune")
    for name, r in summary["ratios"].items():
        target = f"<= {r['bytes_target']:.2f}"
        print(f"{name}:")
        print(f"  bytes written, ours / today     {verdict(r['bytes_vs_today'], _le(r), target)}")
        print(f"  bytes written, ours / Ray Tune  {verdict(r['bytes_vs_tune'], _le(r), target)}")
        print(
            f"  checkpoint bytes only: / today {fmt(r['ckpt_bytes_vs_today'], '.3f')}, "
            f"/ Tune {fmt(r['ckpt_bytes_vs_tune'], '.3f')}; per checkpoint (the runs "
            f"may persist different counts): / today {fmt(r['per_checkpoint_vs_today'], '.3f')}, "
            f"/ Tune {fmt(r['per_checkpoint_vs_tune'], '.3f')}"
        )
        lat = f"<= {LATENCY_TARGET:.2f}"
        print(f"  save in the workload, / today   {verdict(r['save_vs_today'], _le_lat, lat)}")
        print(
            f"  save alone, ours / today        {verdict(r['probe_save_vs_today'], _le_lat, lat)}"
        )
        print(f"  restore, ours / today           {verdict(r['restore_vs_today'], _le_lat, lat)}")


def _le(r: dict[str, Any]) -> Any:
    return lambda v: v <= r["bytes_target"]


def _le_lat(value: float) -> bool:
    return value <= LATENCY_TARGET
