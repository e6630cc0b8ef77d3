"""Prefect flows: the review and its phases. The only package (with deployments/) that imports prefect."""

from dbcrew.logs import run_loggers_escaped

# What a flow logs through get_run_logger() names tables, statements and errors: its arguments are data.
run_loggers_escaped()
