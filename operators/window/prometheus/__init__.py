"""Prometheus as a source of a window: its query API (api.py) and its series as the watcher's passes (steps.py)."""
