"""A directory copy through the transfer's source and sink in this process."""

from __future__ import annotations

from pathlib import Path

from transfer.chunks import layout
from transfer.delta import make_plan
from transfer.sink import SinkWriter
from transfer.source import SourceReader


def copy_in_process(
    src: Path, dst: Path, *, chunk_size: int = 64 * 1024, delta: bool = True, mirror: bool = False
) -> tuple[int, int]:
    source, sink = SourceReader(str(src)), SinkWriter(str(dst), "test")
    plan = make_plan(source.scan(), sink.scan(), delta=delta, mirror=mirror)
    source.start(plan.send)
    sink.begin(plan)
    for spec in layout([e.size for e in plan.send], chunk_size):
        sink.write(source.read(spec).copy())
    result = sink.commit()
    return result.files_written, result.files_kept
