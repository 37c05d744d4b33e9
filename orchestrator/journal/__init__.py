"""The experiment's persistent format: one writer, one reader."""
