"""The window floor: what the watcher (operators/watch) and the diagnosis (operators/diagnose) both read.

The evidence of a window (evidence.py), the pass a watcher stores (passes.py, session_time.py),
the counter and session readers (readers.py), the detector maths (anomaly.py, smirnov.py, the
incident detector incidents.py and its picture picture.py), and the window's sources: live
sampling, the watcher's store, Prometheus (prometheus/: its HTTP API and its series as passes).
Both wings import from here and never from each other (an import-linter contract in pyproject.toml).
"""
