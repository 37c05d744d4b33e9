"""Restore after failures: trialflow's orchestrator against Ray Tune.

(a) Restore latency. One trial (1 CPU) checkpoints ``size`` bytes (1 MiB; 1 GiB in the
full run): ``save_checkpoint`` writes one file of that size, ``load_checkpoint`` reads
it back in full. After each persisted checkpoint the driver SIGKILLs the trial's actor
(its pid comes in the results) and times the way back:

* ours: ``on_trial_error`` (failure detected) and ``on_trial_restore`` (restored,
  RUNNING again) hooks, in the driver;
* Tune (``FailureConfig(max_failures=...)``): ``Callback.on_trial_recover`` (failure
  detected) in the driver; Tune has no "running again" event, so its first step on the
  new actor stands in;
* both: the trainable's own stamps on the new actor (set up, load started, load ended,
  first step), so "kill -> load finished" and "kill -> first step" compare like with
  like.

Storage: a local directory, and the S3 emulator (``moto_server`` on a free loopback
port, started here): ours with ``storage="s3://..."`` and ``storage_options``; Tune with
``storage_filesystem=pyarrow.fs.S3FileSystem(endpoint_override=...)``.

(b) Healthy-trial throughput under failures. ``--healthy`` trivial trials (0.1 CPU) run
beside ``--victims`` trials (0.1 CPU, ``--tp-size`` checkpoints). Once every victim has
a checkpoint and a baseline window has passed, all victims are SIGKILLed at the same
moment. Figures: the healthy trials' results/s (by the actors' own result
timestamps) during the restore window (kill -> the last victim's first step on its new
actor) as a fraction of their rate in the baseline window just before the kill; the
target is >= 90 %.

Each run is a fresh subprocess with its own ``ray.init(num_cpus=2)`` (the orchestrator
starts its own private Ray of the same size). The load average is recorded before each
run: on a shared 2-core machine absolute figures are noisy.

Usage::

    python -m benchmarks.bench_restore            # full: 1 MiB and 1 GiB, local and S3, and (b)
    python -m benchmarks.bench_restore --quick    # 1 MiB only, (b) with 16 MiB checkpoints
    python -m benchmarks.bench_restore --parts latency --sizes 1M,1G --storages local

Figures go to stdout and to ``benchmarks/out/restore.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ._restore_common import AWS_ENV, BUCKET, median, parse_child_output
from ._shared import end_process, wait_serving, write_figures

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out" / "restore.json"
SYSTEMS = ("ours", "tune")
LABELS = {"ours": "ours", "tune": "Ray Tune"}
TARGET_FRACTION = 0.90
_UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text and text[-1] in _UNITS:
        return int(float(text[:-1]) * _UNITS[text[-1]])
    return int(text)


def fmt_size(n: int) -> str:
    for unit in ("G", "M", "K"):
        if n >= _UNITS[unit] and n % _UNITS[unit] == 0:
            return f"{n // _UNITS[unit]} {unit}iB"
    return f"{n} B"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_restore", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--parts", default="latency,throughput")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--storages", default="local,s3", help="latency: local,s3")
    parser.add_argument(
        "--sizes", default=None, help="latency checkpoint sizes (default 1M,1G; --quick 1M)"
    )
    parser.add_argument("--kills", type=int, default=3, help="kills per latency run (< 1 GiB)")
    parser.add_argument("--big-kills", type=int, default=1, help="kills per run at >= 1 GiB")
    parser.add_argument("--healthy", type=int, default=10)
    parser.add_argument("--victims", type=int, default=10)
    parser.add_argument("--tp-size", default=None, help="(b) victims' checkpoint (64M; quick 16M)")
    parser.add_argument("--tp-storage", default="local", choices=("local", "s3"))
    parser.add_argument("--baseline", type=float, default=5.0, help="(b) seconds before the kill")
    parser.add_argument("--post", type=float, default=5.0, help="(b) seconds after the restores")
    parser.add_argument("--repeat", type=int, default=1, help="(b) runs per system (medians)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.parts = [p for p in args.parts.split(",") if p]
    args.systems = [s for s in args.systems.split(",") if s]
    args.storages = [s for s in args.storages.split(",") if s]
    if args.sizes is None:
        args.sizes = "1M" if args.quick else "1M,1G"
    args.sizes = [parse_size(s) for s in args.sizes.split(",") if s]
    args.tp_size = parse_size(args.tp_size or ("16M" if args.quick else "64M"))
    bad = set(args.systems) - set(SYSTEMS)
    if bad:
        parser.error(f"unknown system(s) {sorted(bad)}")
    return args


# -- the S3 emulator ------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _s3_client(url: str) -> Any:
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=url,
        aws_access_key_id=AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        region_name=AWS_ENV["AWS_DEFAULT_REGION"],
    )


@contextlib.contextmanager
def moto_server() -> Iterator[str]:

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    exe = str(Path(sys.executable).parent / "moto_server")
    if not os.path.exists(exe):
        exe = shutil.which("moto_server") or exe
    log = tempfile.NamedTemporaryFile(prefix="bench-restore-moto-", suffix=".log", delete=False)
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    try:
        wait_serving(proc, url, 60, "moto_server", log.name)
        _s3_client(url).create_bucket(Bucket=BUCKET)
        yield url
    finally:
        end_process(proc)
        log.close()
        os.unlink(log.name)


def _empty_prefix(url: str, prefix: str) -> None:
    """Drop a run's objects: the emulator holds them in memory."""
    try:
        s3 = _s3_client(url)
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix):
            keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
            for i in range(0, len(keys), 1000):
                s3.delete_objects(Bucket=BUCKET, Delete={"Objects": keys[i : i + 1000]})
    except Exception as err:  # noqa: BLE001 - cleanup only
        print(f"  (could not empty s3://{BUCKET}/{prefix}: {err})", flush=True)


# -- running children -----------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.setdefault("RAY_AUTH_MODE", "disabled")
    env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    env.update(AWS_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _df_tmp() -> str:
    usage = shutil.disk_usage(tempfile.gettempdir())
    return f"{usage.free / (1 << 30):.0f} GiB free in {tempfile.gettempdir()}"


def run_one(spec: dict[str, Any], timeout: float, attempts: int = 2) -> dict[str, Any]:
    """Run ``spec`` in a fresh interpreter (so a fresh Ray); retry a Ray that did not
    come up (it times out at start when the machine is overloaded)."""
    for attempt in range(attempts):
        load = os.getloadavg()
        started = time.monotonic()
        command = [sys.executable, "-m", "benchmarks._restore_child", json.dumps(spec)]
        try:
            proc = subprocess.run(
                command,
                cwd=ROOT,
                env=_child_env(),
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {"spec": spec, "ok": False, "error": f"timed out after {timeout:.0f} s"}
        figures = parse_child_output(proc.stdout)
        if figures is not None:
            figures.update(spec=spec, load_before=load, process_s=time.monotonic() - started)
            return figures
        tail = "\n".join(
            line
            for line in proc.stderr.strip().splitlines()
            if "(raylet)" not in line and line.strip()
        ).splitlines()[-12:]
        error = f"exit status {proc.returncode}, no figures; stderr tail:\n" + "\n".join(tail)
        if "timed out during startup" in proc.stderr and attempt + 1 < attempts:
            print("(Ray did not start in time; retrying)", end=" ", flush=True)
            continue
        return {"spec": spec, "ok": False, "error": error, "load_before": load}
    raise AssertionError("unreachable")


# -- (a) latency ------------------------------------------------------------------------

LAT_FIELDS = (
    ("detect_s", "detect"),
    ("setup_s", "actor up"),
    ("load_start_s", "load start"),
    ("load_end_s", "load end"),
    ("first_step_s", "1st step"),
    ("running_s", "RUNNING"),
    ("detect_to_running_s", "detect->RUN"),
)


def latency_specs(args: argparse.Namespace) -> list[dict[str, Any]]:
    specs = []
    for size in args.sizes:
        big = size >= 1 << 30
        for storage in args.storages:
            for system in args.systems:
                specs.append(
                    {
                        "part": "latency",
                        "system": system,
                        "storage": storage,
                        "size": size,
                        "kills": args.big_kills if big else args.kills,
                        "every": 40 if big else 10,
                        "step_s": 0.05,
                        "timeout": args.timeout,
                    }
                )
    return specs


def summarize_latency(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for run in runs:
        spec = run["spec"]
        row: dict[str, Any] = {
            "system": spec["system"],
            "storage": spec["storage"],
            "size": spec["size"],
            "ok": bool(run.get("ok")),
            "kills": len(run.get("kills", [])),
            "load_before": (run.get("load_before") or [None])[0],
            "error": run.get("error"),
        }
        for field, _ in LAT_FIELDS:
            row[field] = median([k.get(field) for k in run.get("kills", [])])
        rows.append(row)
    return rows


def latency_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for ours in (r for r in rows if r["system"] == "ours"):
        tune = next(
            (
                r
                for r in rows
                if r["system"] == "tune"
                and r["storage"] == ours["storage"]
                and r["size"] == ours["size"]
            ),
            None,
        )
        if tune is None:
            continue
        entry = {"storage": ours["storage"], "size": ours["size"]}
        for field in ("load_end_s", "first_step_s", "detect_to_running_s"):
            a, b = ours.get(field), tune.get(field)
            entry[f"{field}_ours_over_tune"] = a / b if a is not None and b else None
        out.append(entry)
    return out


def _f(value: float | None, pattern: str) -> str:
    if value is None:
        width = pattern.split(".")[0]
        return "-".rjust(int(width) if width.isdigit() else 1)
    return format(value, pattern)


def print_latency(rows: list[dict[str, Any]], ratios: list[dict[str, Any]]) -> None:
    print()
    print(
        "(a) restore latency: seconds after the SIGKILL (medians over kills); "
        "RUNNING = ours' on_trial_restore hook, Tune's first step on the new actor"
    )
    head = (
        f"{'system':<9}{'storage':<8}{'size':>9}{'kills':>6}"
        + "".join(f"{label:>12}" for _, label in LAT_FIELDS)
        + f"{'load avg':>9}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        line = (
            f"{LABELS[r['system']]:<9}{r['storage']:<8}{fmt_size(r['size']):>9}{r['kills']:>6}"
            + "".join(f"{_f(r[field], '12.2f')}" for field, _ in LAT_FIELDS)
            + f"{_f(r['load_before'], '9.1f')}"
        )
        if not r["ok"]:
            first = (r.get("error") or "failed").strip().splitlines()
            line += f"  FAILED: {first[-1][:100] if first else ''}"
        print(line)
    if ratios:
        print()
        print("ours / Tune (lower is better for ours)")
        for e in ratios:
            print(
                f"  {e['storage']:<6}{fmt_size(e['size']):>9}:  kill->load end "
                f"{_f(e['load_end_s_ours_over_tune'], '5.2f')}x   kill->first step "
                f"{_f(e['first_step_s_ours_over_tune'], '5.2f')}x   detect->running "
                f"{_f(e['detect_to_running_s_ours_over_tune'], '5.2f')}x"
            )


# -- (b) throughput under failures ---------------------------------------------------------


def throughput_spec(args: argparse.Namespace, system: str) -> dict[str, Any]:
    return {
        "part": "throughput",
        "system": system,
        "storage": args.tp_storage,
        "size": args.tp_size,
        "healthy": args.healthy,
        "victims": args.victims,
        "cpu": 0.1,
        "step_s": 0.1,
        # One checkpoint before the kill and none in the windows measured: the baseline
        # and the restore window differ only by the restores.
        "every": 100,
        "baseline_s": args.baseline,
        "post_s": args.post,
        "timeout": args.timeout,
    }


TP_FIELDS = (
    "baseline_rate",
    "restore_rate",
    "after_rate",
    "fraction",
    "fraction_vs_after",
    "restore_window_s",
)


def summarize_throughput(runs: list[dict[str, Any]], systems: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for system in systems:
        mine = [r for r in runs if r["spec"]["system"] == system]
        row = {f: median([r.get(f) for r in mine]) for f in TP_FIELDS}
        row["detect_s_median"] = median(
            [median(r.get("detect_s") or []) for r in mine if r.get("detect_s")]
        )
        row["victims"] = {
            k: median([(r.get("victims") or {}).get(k) for r in mine])
            for k in sorted({k for r in mine for k in (r.get("victims") or {})})
        }
        row["runs"] = len(mine)
        row["ok"] = bool(mine) and all(r.get("ok") for r in mine)
        row["load_before"] = median([(r.get("load_before") or [None])[0] for r in mine])
        row["errors"] = [r.get("error") for r in mine if not r.get("ok")]
        rows[system] = row
    ratios = {}
    if "ours" in rows and "tune" in rows:
        o, t = rows["ours"], rows["tune"]
        for f in (
            "fraction",
            "fraction_vs_after",
            "restore_rate",
            "baseline_rate",
            "restore_window_s",
        ):
            ratios[f"{f}_ours_over_tune"] = o[f] / t[f] if o[f] is not None and t[f] else None
    return {"rows": rows, "ratios": ratios}


def _pct(value: float | None) -> str:
    return (
        f"{_f(None if value is None else value * 100, '9.0f')}{'%' if value is not None else ' '}"
    )


def print_throughput(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    print()
    print(
        f"(b) {args.healthy} healthy trivial trials while {args.victims} trials with "
        f"{fmt_size(args.tp_size)} checkpoints ({args.tp_storage}) restore at once; "
        f"medians of {args.repeat} run(s)"
    )
    head = (
        f"{'system':<9}{'baseline res/s':>15}{'restore res/s':>15}{'after res/s':>13}"
        f"{'fraction':>10}{'vs after':>10}{'window s':>10}{'detect s':>10}{'load avg':>9}"
    )
    print(head)
    print("-" * len(head))
    for system, r in summary["rows"].items():
        frac = r["fraction"]
        verdict = (
            ""
            if frac is None
            else f"  (target >= {TARGET_FRACTION:.0%}: "
            f"{'met' if frac >= TARGET_FRACTION else 'MISSED'})"
        )
        line = (
            f"{LABELS[system]:<9}{_f(r['baseline_rate'], '15.0f')}{_f(r['restore_rate'], '15.0f')}"
            f"{_f(r['after_rate'], '13.0f')}"
            f"{_f(None if frac is None else frac * 100, '9.0f')}{'%' if frac is not None else ' '}"
            f"{_pct(r['fraction_vs_after'])}"
            f"{_f(r['restore_window_s'], '10.2f')}{_f(r['detect_s_median'], '10.2f')}"
            f"{_f(r['load_before'], '9.1f')}{verdict}"
        )
        if not r["ok"]:
            errs = [e for e in r["errors"] if e]
            line += f"  FAILED: {errs[0].strip().splitlines()[-1][:100] if errs else ''}"
        print(line)
    print("victims' way back, seconds after the kill (median / last of the victims):")
    for system, r in summary["rows"].items():
        v = r.get("victims") or {}
        if v:
            print(
                f"  {LABELS[system]:<9}"
                + "  ".join(
                    f"{label} {_f(v.get(ev + '_median_s'), '.2f')} / "
                    f"{_f(v.get(ev + '_max_s'), '.2f')}"
                    for ev, label in (
                        ("setup", "actor up"),
                        ("load_start", "load start"),
                        ("load_end", "load end"),
                        ("first_step", "1st step"),
                    )
                )
            )
    ratios = summary["ratios"]
    if ratios:
        print(
            f"ours / Tune: fraction {_f(ratios['fraction_ours_over_tune'], '.2f')}x "
            f"(vs after: {_f(ratios['fraction_vs_after_ours_over_tune'], '.2f')}x), "
            f"healthy res/s during restore {_f(ratios['restore_rate_ours_over_tune'], '.2f')}x, "
            f"baseline res/s {_f(ratios['baseline_rate_ours_over_tune'], '.2f')}x, "
            f"restore window {_f(ratios['restore_window_s_ours_over_tune'], '.2f')}x"
        )


# -- main ----------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    print(
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} on "
        f"{os.cpu_count()} CPUs; {_df_tmp()}",
        flush=True,
    )
    runs: list[dict[str, Any]] = []
    specs: list[dict[str, Any]] = []
    if "latency" in args.parts:
        specs += latency_specs(args)
    if "throughput" in args.parts:
        for attempt in range(args.repeat):
            order = args.systems if attempt % 2 == 0 else list(reversed(args.systems))
            specs += [throughput_spec(args, s) for s in order]
    need_s3 = any(s["storage"] == "s3" for s in specs)
    with moto_server() if need_s3 else contextlib.nullcontext(None) as url:
        for n, spec in enumerate(specs, 1):
            if spec["storage"] == "s3":
                spec["endpoint"] = url
                spec["prefix"] = f"bench-restore-{uuid.uuid4().hex[:8]}"
            what = (
                f"latency {fmt_size(spec['size'])} {spec['storage']}"
                if spec["part"] == "latency"
                else f"throughput {spec['healthy']}+{spec['victims']} trials"
            )
            print(f"[{n}/{len(specs)}] {what} {LABELS[spec['system']]}...", end=" ", flush=True)
            figures = run_one(spec, args.timeout)
            if spec["storage"] == "s3":
                _empty_prefix(url, spec["prefix"])
            runs.append(figures)
            if not figures.get("ok"):
                print(f"FAILED: {figures.get('error', '')}", flush=True)
            elif spec["part"] == "latency":
                ks = figures["kills"]
                print(
                    f"kill->running {_f(median([k.get('running_s') for k in ks]), '.2f')} s "
                    f"(load end {_f(median([k.get('load_end_s') for k in ks]), '.2f')} s), "
                    f"load {figures['load_before'][0]:.1f}, {_df_tmp()}",
                    flush=True,
                )
            else:
                frac = figures.get("fraction")
                print(
                    f"healthy {_f(figures.get('baseline_rate'), '.0f')} -> "
                    f"{_f(figures.get('restore_rate'), '.0f')} res/s "
                    f"({_f(None if frac is None else frac * 100, '.0f')}%) over "
                    f"{_f(figures.get('restore_window_s'), '.2f')} s, "
                    f"load {figures['load_before'][0]:.1f}",
                    flush=True,
                )
            _write(args, runs)
    summary = _summary(args, runs)
    if summary["latency"]["rows"]:
        print_latency(summary["latency"]["rows"], summary["latency"]["ratios"])
    if summary["throughput"]["rows"]:
        print_throughput(args, summary["throughput"])
    print(f"\nload average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"figures written to {args.out}")
    return 0 if all(r.get("ok") for r in runs) else 1


def _summary(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    lat = [r for r in runs if r["spec"]["part"] == "latency"]
    tp = [r for r in runs if r["spec"]["part"] == "throughput"]
    rows = summarize_latency(lat)
    return {
        "latency": {"rows": rows, "ratios": latency_ratios(rows)},
        "throughput": summarize_throughput(tp, args.systems) if tp else {"rows": {}},
    }


def _write(args: argparse.Namespace, runs: list[dict[str, Any]]) -> None:
    write_figures(args.out, "restore", vars(args), _summary(args, runs), runs)


if __name__ == "__main__":
    sys.exit(main())
