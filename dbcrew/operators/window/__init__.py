"""The window floor: what the watcher (dbcrew/operators/watch) and the diagnosis (dbcrew/operators/diagnose) both read.

- the evidence of a window (evidence.py) and the pass a watcher stores (passes.py, session_time.py);
- the counter and session readers every window is made of (readers.py);
- the detector maths: the anomaly tests of a window against its baseline (anomaly.py, smirnov.py),
  the watcher's incident detector (incidents.py) and the picture of an incident (picture.py);
- a window's three sources, siblings: sampled live (live.py), the watcher's store (store.py) and a
  team's Prometheus (prometheus/: source.py, its series as passes in steps.py, the HTTP API in api.py).

Both wings import from here and never from each other, and nothing here imports either wing
(import-linter contracts in pyproject.toml).
"""
