"""The driver's I/O: the loop, Ray calls, placement, hooks, garbage collection."""
