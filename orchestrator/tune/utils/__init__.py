"""``ray.tune.utils``: only ``mock_trainable`` (Tune's examples import it)."""
