"""Prometheus as a source of a window: which series are the target's (source.py), its series as the watcher's passes
(steps.py), and its query API (api.py), the one HTTP client of Prometheus."""
