"""The scripted OpenAI-compatible server, as a fixture for every LLM test."""

from tests.llm.test_brain_bounds import server  # noqa: F401 - fixtures are found by name
