"""Prompt templates (Jinja), one per role and purpose, and their loader. No prompt text lives in Python."""

from dbcrew.prompts.loader import render

__all__ = ["render"]
