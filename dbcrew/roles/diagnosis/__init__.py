"""The LLM diagnosis: experts as tool-calling agents on the shared agent loop (dbcrew/roles/agent/: RCAgent's
controller, D-Bot's tree search), their agenda and tools, a hallucination guard, and a chief that merges their
causes with the rules' (never worse than offline). The diagnosis consults them as a planned step after the
cross review (dbcrew/operators/diagnose/llm_experts.py)."""
