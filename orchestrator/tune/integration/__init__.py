"""Ray's integrations under the facade: ``orchestrator.tune.integration.<name>`` is
``ray.air.integrations.<name>`` (``python -m orchestrator tune`` maps one onto the
other). Nothing is imported here: each module imports its library only when used."""

__all__: list[str] = []
