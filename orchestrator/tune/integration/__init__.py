"""Ray Tune's framework callbacks (``ray.tune.integration.<framework>``) under the same
names: each module re-exports trialflow's own adapter
(:mod:`orchestrator.integrations`) with Ray Tune's names, arguments and results.
Nothing is imported here: each module needs its framework installed."""

__all__: list[str] = []
