"""The watcher's operators: one sampling pass of a target (sampling.py) and its session sampler (session_sampler.py).

What a pass keeps and how incidents are detected is the window floor's (dbcrew/operators/window), which the
diagnosis reads too.
"""
