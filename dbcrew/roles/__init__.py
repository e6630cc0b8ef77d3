"""The crew's roles: planner, workers (tasker, extractor, retriever, painter), monitor.

Plain Python, testable without Prefect; dbcrew/flows/ wraps them as Prefect flows and tasks.
"""
