"""Ray Tune's ``BasicVariantGenerator``: random and grid search that draws what Tune
draws (trialflow's NumpySearch: the same seed, or ``np.random.seed``, gives Tune's
configs in Tune's order)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.search import NumpySearch

__all__ = ["BasicVariantGenerator"]


class BasicVariantGenerator(NumpySearch):
    """``BasicVariantGenerator(points_to_evaluate=None, max_concurrent=0,
    constant_grid_search=False, random_state=None)``: ``num_samples`` repeats of the
    grid, random domains drawn per trial; ``max_concurrent`` (0: no limit) bounds the
    trials running at once."""

    def __init__(
        self,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        max_concurrent: int = 0,
        constant_grid_search: bool = False,
        random_state: Any = None,
    ) -> None:
        super().__init__(
            random_state,
            points_to_evaluate=points_to_evaluate,
            constant_grid_search=constant_grid_search,
        )
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError(f"max_concurrent must be an int >= 0, got {max_concurrent!r}")
        self.max_concurrent = max_concurrent
