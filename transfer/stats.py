"""What a copy reports: a final :class:`TransferStats` and running :class:`TransferProgress`."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TransferProgress", "TransferStats"]


@dataclass(frozen=True, slots=True)
class TransferStats:
    """The outcome of one completed copy.

    ``bytes_sent`` counts file bytes actually moved (hard-linked bytes on the same node
    included), ``files_skipped`` the files the delta found identical at the target,
    ``seconds`` the wall time including actor start-up.
    """

    bytes_sent: int
    files_sent: int
    files_skipped: int
    files_deleted: int
    chunks: int
    seconds: float
    same_node: bool

    @property
    def mb_per_s(self) -> float:
        return self.bytes_sent / 1e6 / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True, slots=True)
class TransferProgress:
    """Handed to the ``progress`` callback as chunks land at the target: after the
    first, then at most every 50 ms (``chunks_done`` counts them all), and after the
    last."""

    bytes_done: int
    bytes_total: int
    files_done: int
    files_total: int
    chunks_done: int
    chunks_total: int
