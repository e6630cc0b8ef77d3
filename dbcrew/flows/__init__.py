"""Prefect flows: the review and its phases. The only package (with deployments/) that imports prefect."""
