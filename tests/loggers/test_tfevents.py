"""The TensorBoard records encoded by ``orchestrator.views.loggers.tfevents``, parsed
with tensorboardX's own classes and compared with what tensorboardX makes of the same
values; and the logger no longer imports tensorboardX (nor, through it, torch)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.views.loggers import tfevents

pytest.importorskip("tensorboardX")

from tensorboardX.proto.event_pb2 import Event, SessionLog  # noqa: E402
from tensorboardX.proto.summary_pb2 import Summary  # noqa: E402
from tensorboardX.record_writer import masked_crc32c  # noqa: E402
from tensorboardX.summary import hparams  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def parsed(data: bytes) -> Event:
    event = Event()
    event.ParseFromString(data)
    return event


def test_events_are_tensorboardx_events() -> None:
    values = {"loss": 0.25, "eval/acc": 0.0, "big": 1e39, "nan": math.nan, "neg": -3}
    mine = parsed(tfevents.event(12.5, step=7, summary=tfevents.scalars_summary(values)))
    theirs = Event(
        wall_time=12.5,
        step=7,
        summary=Summary(value=[Summary.Value(tag=k, simple_value=v) for k, v in values.items()]),
    )
    assert mine.wall_time == theirs.wall_time and mine.step == theirs.step
    got = [(v.tag, v.simple_value) for v in mine.summary.value]
    want = [(v.tag, v.simple_value) for v in theirs.summary.value]
    assert [t for t, _ in got] == [t for t, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert a == b or (math.isnan(a) and math.isnan(b))
    assert all(v.HasField("simple_value") for v in mine.summary.value)  # 0.0 too
    header = parsed(tfevents.event(3.0, file_version="brain.Event:2"))
    assert header == Event(wall_time=3.0, file_version="brain.Event:2")
    purge = parsed(tfevents.event(3.0, step=5, session_log=tfevents.session_start()))
    assert purge == Event(wall_time=3.0, step=5, session_log=SessionLog(status=SessionLog.START))


def test_hparams_are_tensorboardx_hparams() -> None:
    from tensorboardX.proto.plugin_hparams_pb2 import HParamsPluginData

    params = {"lr": 0.1, "n": 0, "name": "", "flag": False, "fn": len, "skip": None, "x": [1]}
    metrics = {"loss": 1.0, "eval/acc": 0.5}
    summaries = tfevents.hparams_summaries(params, metrics)
    mine = [parsed(tfevents.event(1.0, summary=s)).summary for s in summaries]
    theirs = list(hparams(hparam_dict=params, metric_dict=metrics))
    assert len(mine) == len(theirs) == 3
    for a, b in zip(mine, theirs, strict=True):  # the content compared parsed: a map's
        (va,), (vb,) = a.value, b.value  # order in the bytes is not fixed
        assert va.tag == vb.tag
        assert va.metadata.plugin_data.plugin_name == vb.metadata.plugin_data.plugin_name
        content_a, content_b = HParamsPluginData(), HParamsPluginData()
        content_a.ParseFromString(va.metadata.plugin_data.content)
        content_b.ParseFromString(vb.metadata.plugin_data.content)
        assert content_a == content_b


def test_the_masked_crc_is_tfrecords() -> None:
    for data in (b"", b"a", bytes(range(256)) * 3):
        assert tfevents.masked_crc32c(data) == masked_crc32c(data)
        crc = tfevents._crc32c(data)  # the fallback where no C implementation is installed
        assert (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF == masked_crc32c(data)


def test_the_tensorboard_logger_imports_neither_tensorboardx_nor_torch(tmp_path: Path) -> None:
    """tensorboardX's package imports torch when it is installed: 2-3 CPU seconds and
    260 MiB of the driver's, at its first trial, for nothing the logger used."""
    code = (
        "import asyncio, sys\nfrom pathlib import Path\n"
        "from orchestrator.views.loggers import ExperimentLogger\n"
        "from tests.support.logger_fakes import FakeTrial\n"
        "async def main():\n"
        "    logger = ExperimentLogger(Path(sys.argv[1]), flush_interval=60)\n"
        "    trial = FakeTrial('t1')\n"
        "    await logger.on_trial_start(trial)\n"
        "    await logger.on_trial_result(trial, trial.report(1, loss=0.5))\n"
        "    await logger.on_trial_complete(trial)\n"
        "    await logger.aclose()\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in ('tensorboardX', 'torch') if m in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        env=env, cwd=str(ROOT), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.split()[-1] == "[]", done.stdout
    assert any(".out.tfevents." in p.name for p in (tmp_path / "t1").iterdir())
