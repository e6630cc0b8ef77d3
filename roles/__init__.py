"""The crew's roles: planner, workers (tasker, extractor, retriever, painter), monitor.

Plain Python, testable without Prefect; flows/ wraps them as Prefect flows and tasks.
"""
