"""TensorBoard's event records, encoded here: the few protobuf messages the TensorBoard
logger writes (``Event``, ``Summary`` with scalars, ``SessionLog``, the hparams plugin's
three summaries) and the TFRecord framing's masked CRC-32C.

Why not tensorboardX's classes: importing anything of tensorboardX runs its package's
``__init__``, which imports torch when it is installed; that cost the driver 2-3 CPU
seconds at its first trial (8 s on a loaded 2-core machine) and 260 MiB, for nothing the
logger uses. The messages are proto3 as tensorboardX declares them (same field numbers,
defaults left out), so TensorBoard and tensorboardX read them as their own;
``tests/loggers/test_tfevents.py`` parses each with tensorboardX's classes.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["event", "hparams_summaries", "masked_crc32c", "scalars_summary", "session_start"]

# Wire types.
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5
# HParams' enums (tensorboardX.hparam.DataType, .Status) and SessionLog.START.
_STRING, _BOOL, _FLOAT64 = 1, 2, 3
_SUCCESS = 1
_START = 1


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int64: two's complement, ten bytes
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(data)) + data


def _text(field: int, text: str) -> bytes:
    return _bytes(field, text.encode()) if text else b""


def _double(field: int, value: float) -> bytes:
    return _key(field, _FIXED64) + struct.pack("<d", value) if value else b""


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value) if value else b""


def event(
    wall_time: float,
    *,
    step: int = 0,
    file_version: str = "",
    summary: bytes | None = None,
    session_log: bytes | None = None,
) -> bytes:
    """An ``Event``: ``summary`` and ``session_log`` are encoded messages."""
    out = _double(1, wall_time) + _int(2, step) + _text(3, file_version)
    if summary is not None:
        out += _bytes(5, summary)
    if session_log is not None:
        out += _bytes(7, session_log)
    return out


def session_start() -> bytes:
    """``SessionLog(status=START)``: TensorBoard drops the steps after the event's."""
    return _int(1, _START)


def scalars_summary(values: Mapping[str, float]) -> bytes:
    """A ``Summary`` of ``tag -> simple_value`` (a 32-bit float, as TensorBoard's)."""
    out = bytearray()
    for tag, number in values.items():
        value = _text(1, tag) + _key(2, _FIXED32) + struct.pack("<f", _as_float32(number))
        out += _bytes(1, value)
    return bytes(out)


def _as_float32(number: float) -> float:
    """What ``simple_value`` holds of ``number``: out-of-range values become infinities,
    as protobuf's own conversion makes them."""
    if math.isfinite(number) and abs(number) > 3.4028234663852886e38:
        return math.copysign(math.inf, number)
    return number


def hparams_summaries(params: Mapping[str, Any], metrics: Mapping[str, float]) -> list[bytes]:
    """The hparams plugin's experiment, session-start and session-end summaries, as
    tensorboardX's ``summary.hparams(params, metrics)`` makes them: a string, bool or
    number param is typed and valued, a callable is its name, None is left out, anything
    else is listed with no type and no value."""
    infos, values = bytearray(), bytearray()
    for name, value in params.items():
        if value is None:
            continue
        # google.protobuf.Value's kinds are a oneof: a default value is still written.
        if isinstance(value, str):
            kind, encoded = _STRING, _bytes(3, value.encode())
        elif isinstance(value, bool):
            kind, encoded = _BOOL, _key(4, _VARINT) + _varint(int(value))
        elif isinstance(value, (int, float)):
            kind, encoded = _FLOAT64, _key(2, _FIXED64) + struct.pack("<d", float(value))
        elif callable(value):
            name_of = str(getattr(value, "__name__", value))
            kind, encoded = _STRING, _bytes(3, name_of.encode())
        else:
            infos += _bytes(4, _text(1, name))
            continue
        infos += _bytes(4, _text(1, name) + _int(4, kind))
        values += _bytes(1, _text(1, name) + _bytes(2, encoded))  # a map entry
    for tag in metrics:
        infos += _bytes(5, _bytes(1, _text(2, tag)))  # MetricInfo(name=MetricName(tag))
    experiment = _plugin_summary("_hparams_/experiment", _bytes(2, bytes(infos)))
    start = _plugin_summary("_hparams_/session_start_info", _bytes(3, bytes(values)))
    end = _plugin_summary("_hparams_/session_end_info", _bytes(4, _int(1, _SUCCESS)))
    return [experiment, start, end]


def _plugin_summary(tag: str, content: bytes) -> bytes:
    """A ``Summary`` of one value ``tag`` whose metadata carries the hparams plugin's
    ``content`` (an encoded ``HParamsPluginData``, version 0)."""
    plugin_data = _text(1, "hparams") + _bytes(2, content)
    metadata = _bytes(1, plugin_data)
    return _bytes(1, _text(1, tag) + _bytes(9, metadata))


# -- the TFRecord framing's checksum ------------------------------------------------------


def _crc_table() -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc_table()


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # the C implementation, where installed (Google's storage clients bring it)
    from google_crc32c import value as _crc32c_c

    def _crc(data: bytes) -> int:
        return int(_crc32c_c(data))

except ImportError:  # pragma: no cover - depends on what is installed
    _crc = _crc32c


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data``."""
    crc = _crc(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
