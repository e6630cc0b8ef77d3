"""The LLM endpoint's `DBCREW_LLM_*` variables, and how an endpoint answers in structure (`Capability`).

The fields are read with the rest of the environment (`dbcrew.settings.environment.Environment` derives
from `LlmVariables`): this module reads nothing itself.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, Field


class Capability(StrEnum):
    """How an endpoint can be made to answer in structure: native tool calls (OpenAI, vLLM with a
    tool parser, recent Ollama), a JSON schema as response_format (OpenAI, vLLM, llama.cpp server),
    or only JSON asked for in the prompt (anything else)."""

    TOOLS = "tools"
    JSON_SCHEMA = "json_schema"
    PROMPTED = "prompted"


class LlmVariables(BaseModel):
    """The LLM brain's endpoint, its limits, and what one LLM diagnosis may spend."""

    llm_base_url: str | None = Field(
        None,
        description="an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp);"
        " set (or OPENAI_API_KEY set), the LLM brain is the default",
    )
    llm_model: str = Field("gpt-4o-mini", description="the model the LLM brain asks")
    llm_timeout: float = Field(
        60.0,
        gt=0,
        description="seconds one request may take; with the retries it bounds what"
        " a dead or slow endpoint adds to a review: timeout x (1 + retries)",
    )
    llm_max_retries: int = Field(2, ge=0, le=10, description="retries of a failed request")
    llm_budget: float = Field(
        60.0,
        gt=0,
        description="seconds all of one run's LLM requests may take together (retries and"
        " repairs included); once spent, the rules answer the rest of the run and the report says so",
    )
    llm_context: int = Field(
        4096,
        ge=512,
        description="tokens of the model's context window: prompts are cut to fit it (the answer"
        " gets at most half), the cut said in the prompt (Ollama's default is 2,048-4,096)",
    )
    llm_capability: Capability | None = Field(
        None,
        description="how the endpoint answers in structure:"
        " native tool calls, a JSON schema as response_format, or JSON asked for in"
        " the prompt; unset: probed once per endpoint and model (dbcrew/llm/capability.py)",
    )
    llm_cache_dir: Path | None = Field(
        None,
        description="where answers are kept by request, one file each, so a later"
        " run asking the same is answered without a call; unset: in memory, for the"
        " process only",
    )
    llm_diag_calls: int = Field(30, ge=1, description="calls one LLM diagnosis may make")
    llm_diag_tokens: int = Field(
        60_000, ge=1, description="tokens (prompt and completion) one LLM diagnosis may spend"
    )
    llm_diag_seconds: float = Field(180.0, ge=1, description="seconds one LLM diagnosis may take")
    llm_diag_steps: int = Field(
        8, ge=1, description="turns of one expert's search in an LLM diagnosis"
    )
    llm_diag_samples: int = Field(
        1, ge=1, description="self-consistency: answers per expert, codes kept by majority vote"
    )
    llm_diag_experts: int = Field(
        3, ge=1, description="the largest team of experts one LLM diagnosis engages"
    )
    llm_observation_chars: int = Field(
        1_200,
        ge=0,
        description="an observation longer than this is shown as its head"
        " and a snapshot key the model can expand (0: shown whole)",
    )
