"""Ray Tune's tested behaviours, each a small case run on Ray Tune and on trialflow's
facade (``python -m benchmarks.bench_tune_compat``).

Each case is written here in our own words after a behaviour Ray Tune's tests or its
documentation's code check (``test_tuner.py``, ``test_result_grid.py``,
``test_stopper.py``, ``test_sample.py``, ``test_searchers.py`` (Optuna),
``test_tuner_restore.py``, ``test_function_api.py``,
``test_api_checkpoint_integration.py`` and ``doc/source/tune/doc_code``), using only
the public API. A case takes a :class:`~benchmarks.tune_compat.system.System` (which
module is ``tune``: ``ray.tune`` or ``orchestrator.tune``) and raises if the behaviour
does not hold.
"""
