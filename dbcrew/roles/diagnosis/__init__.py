"""The LLM diagnosis: experts as tool-calling agents under RCAgent's controller, a hallucination
guard, and a chief that merges their causes with the rules' (never worse than offline)."""
