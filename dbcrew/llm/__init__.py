"""The kernel's side of the brains: the interface every brain answers, and the LLM client.

The brains themselves (the offline rules brain and the LLM brain) live in dbcrew/roles/brains/: they
know the scenario playbooks and the roles' prompts, which sit above the kernel.
"""

from dbcrew.llm.base import Brain

__all__ = ["Brain"]
