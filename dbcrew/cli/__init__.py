"""The command line: `dbcrew` and `python -m dbcrew.cli` start at entry.py, which hides a password in the
command line before anything else loads."""
