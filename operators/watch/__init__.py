"""The watcher's operators: one sampling pass of a target (sampling.py) and what a pass keeps (passes.py)."""
