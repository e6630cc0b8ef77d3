"""One LLM call with repair against any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp).

Every answer is parsed into a pydantic model. A malformed, fenced or wrong-schema answer is
repaired by asking again with the error (RCAgent's regeneration), at most `max_repairs` times.
The client knows nothing of roles: the prompts it sends are rendered by the caller's `render`
(dbcrew/prompts/ sits above the kernel), and the brains in dbcrew/roles/ decide what to do when it gives up.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import json_repair
import openai
from pydantic import BaseModel, ValidationError

from dbcrew.llm import capability as probing
from dbcrew.llm.base import BrainError, BudgetSpent, EndpointDown
from dbcrew.llm.fit import answer_room, approx_tokens, fit
from dbcrew.llm.messages import template_safe
from dbcrew.models.report import LlmUsage
from dbcrew.secrets import secret
from dbcrew.settings.environment import environment
from dbcrew.settings.llm import Capability

Model = TypeVar("Model", bound=BaseModel)
Render = Callable[[str, dict[str, Any]], str]
ECHOED_CUT = 200  # characters of a cut-off answer repeated to the model when asking again
REPAIR_ROOM = 200  # tokens a repair adds to the conversation: the cut answer echoed and the error
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def endpoint_capability() -> Capability | None:
    """DBCREW_LLM_CAPABILITY as declared (None: probe it); UsageError in one line for anything else."""
    return environment().llm_capability


def run_budget() -> float:
    """DBCREW_LLM_BUDGET: the seconds one run's requests may take in all, after which the rules
    answer the rest of the run. Retries, repairs and a slow endpoint that answers just inside the
    timeout all draw on it, so no kind of endpoint can stretch a run by more."""
    return environment().llm_budget


def endpoint_limits() -> tuple[float, int]:
    """(seconds a request may take, retries of a failed request) from DBCREW_LLM_TIMEOUT and
    DBCREW_LLM_MAX_RETRIES; UsageError in one line for a value out of range. Together with the
    brain's circuit breaker (an endpoint that did not answer is not asked again in the run), they
    bound what a dead or slow endpoint adds to a review: timeout x (1 + retries)."""
    env = environment()
    return env.llm_timeout, env.llm_max_retries


def strip_fences(text: str) -> str:
    match = _FENCE.match(text)
    return match.group(1) if match else text.strip()


def extract_json(text: str) -> str:
    """The JSON object in an answer: as it is when it parses, else found in the prose or code fence
    around it and repaired (trailing commas, missing quotes or brackets) by json-repair. Asking the
    model again costs a round trip and tokens; a sentence around the object should not."""
    stripped = strip_fences(text)
    try:
        json.loads(stripped)
    except ValueError:
        return json_repair.repair_json(text) or stripped
    return stripped


@dataclass(frozen=True)
class FunctionCall:
    """A function the model asked to call, as the endpoint returned it (its arguments a JSON string)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """One chat completion as the caller needs it: text, tool calls, and what it cost."""

    text: str
    tool_calls: tuple[FunctionCall, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached: bool = False
    truncated: bool = (
        False  # the endpoint stopped at max_tokens: a repairable answer, not a time-out
    )


def llm_cache_dir() -> Path | None:
    """DBCREW_LLM_CACHE_DIR: where answers are kept between runs; none (memory only) when unset."""
    directory = environment().llm_cache_dir
    return directory.expanduser() if directory else None


@dataclass
class ResponseCache:
    """Completions keyed by a hash of the whole request (model, messages, tools, format, temperature,
    sample): asking the same thing again, in a re-run diagnosis or a bench pass, costs no call. With a
    `directory`, every answer is also a file `<key>.json` there (written aside and renamed into place,
    so a reader never sees half of one), and a later run is answered from it. Only answers are
    stored, never the request (which holds the database's data); a damaged file is asked again."""

    limit: int = 512
    directory: Path | None = None
    entries: dict[str, Completion] = field(default_factory=dict)

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        return hashlib.sha256(json.dumps(request, sort_keys=True, default=str).encode()).hexdigest()

    def get(self, key: str) -> Completion | None:
        hit = self.entries.get(key)
        if hit is not None or self.directory is None:
            return hit
        path = self.directory / f"{key}.json"
        if not path.is_file():
            return None
        try:
            stored = json.loads(path.read_text())
            hit = Completion(
                stored["text"],
                tuple(FunctionCall(**c) for c in stored["tool_calls"]),
                stored["prompt_tokens"],
                stored["completion_tokens"],
            )
        except (ValueError, KeyError, TypeError):
            return None  # not an answer this version wrote: the call is made and the file rewritten

        self._remember(key, hit)
        return hit

    def put(self, key: str, completion: Completion) -> None:
        self._remember(key, completion)
        if self.directory is not None:
            self.directory.mkdir(parents=True, exist_ok=True)
            partial = self.directory / f"{key}.{os.getpid()}.partial"
            partial.write_text(json.dumps(dataclasses.asdict(completion)))
            partial.replace(self.directory / f"{key}.json")

    def _remember(self, key: str, completion: Completion) -> None:
        if len(self.entries) >= self.limit:
            self.entries.pop(next(iter(self.entries)))
        self.entries[key] = completion


class LlmClient:
    """The `openai` client, the model's name, and the usage this client has spent."""

    def __init__(
        self,
        render: Render,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        timeout: float | None = None,
        max_retries: int | None = None,
        max_repairs: int = 2,
        budget_seconds: float | None = None,
        context_tokens: int | None = None,
    ):
        self._render = render
        env = environment()
        self.budget_seconds = budget_seconds if budget_seconds is not None else run_budget()
        self.spent_seconds = 0.0  # wall time of this client's requests, retries included
        self.context_tokens = context_tokens or env.llm_context
        self.model = model or env.llm_model
        default_timeout, default_retries = endpoint_limits()
        self._client = openai.OpenAI(
            base_url=base_url or env.llm_base_url,
            api_key=api_key or secret("OPENAI_API_KEY") or "not-needed",
            timeout=timeout if timeout is not None else default_timeout,
            max_retries=max_retries if max_retries is not None else default_retries,
        )
        self._max_repairs = max_repairs
        self.timeout = timeout if timeout is not None else default_timeout
        self.usage = LlmUsage()

    def prompt(
        self,
        template: str,
        context: dict[str, Any],
        model: type[BaseModel],
        max_tokens: int,
        system: str,
    ) -> str:
        """`template` rendered with `context` and the answer's schema, its data cut to fit the
        declared context (DBCREW_LLM_CONTEXT) beside the system prompt and the answer's room; the cut
        said at its end (dbcrew/llm/fit.py)."""
        room = (
            self.context_tokens
            - answer_room(max_tokens, self.context_tokens)
            - approx_tokens(system)
            - REPAIR_ROOM
        )
        fitted = fit(
            lambda data: self._render(template, {**data, "schema": model.model_json_schema()}),
            context,
            room,
        )
        if not fitted.cut:
            return fitted.text
        return self._render(
            "cut.j2",
            {"prompt": fitted.text, "cut": fitted.cut, "context_tokens": self.context_tokens},
        )

    def capability(self) -> Capability:
        """How this endpoint and model answer in structure: DBCREW_LLM_CAPABILITY when set, else
        probed once per process (dbcrew/llm/capability.py). The probe's time is paid from the run's
        budget; a probe that gets no answer (or no budget left) decides nothing: `prompted`, the mode
        every endpoint can follow, for this question, and the next question probes again."""
        declared = endpoint_capability()
        if declared is not None:
            return declared
        base_url = str(self._client.base_url)
        if (found := probing.known(base_url, self.model)) is not None:
            return found
        left = self.budget_seconds - self.spent_seconds
        if left <= 0:
            return Capability.PROMPTED
        started = time.monotonic()
        try:
            return probing.probe(
                self._client.with_options(max_retries=0),
                base_url,
                self.model,
                min(self.timeout, left),
            )
        except openai.APIError:
            return Capability.PROMPTED
        finally:
            self.spent_seconds += time.monotonic() - started

    def ask(
        self, template: str, context: dict[str, Any], model: type[Model], max_tokens: int
    ) -> Model:
        """One answer as a validated `model` of at most `max_tokens`, regenerated with the validation
        error when it is not (an answer cut at `max_tokens` is asked for again, shorter); EndpointDown
        when the endpoint does not answer, BudgetSpent when the run's time is, BrainError when it fails
        otherwise or no repair validates."""
        # An endpoint set to answer by JSON schema (llama.cpp's grammar, vLLM's guided decoding)
        # gets the answer's schema as response_format: a small model cannot leave it.
        structured = (
            {
                "type": "json_schema",
                "json_schema": {"name": model.__name__, "schema": model.model_json_schema()},
            }
            if self.capability() is Capability.JSON_SCHEMA
            else None
        )
        system = self._render("system.j2", {})
        messages: list[dict[str, str]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.prompt(template, context, model, max_tokens, system)},
        ]
        max_tokens = answer_room(max_tokens, self.context_tokens)
        error = ""
        for _ in range(self._max_repairs + 1):
            completion = self.complete(messages, max_tokens=max_tokens, response_format=structured)
            text = completion.text
            if completion.truncated:  # json-repair would close it into a valid, shorter answer
                error = (
                    f"the answer was cut off at {max_tokens} tokens before it was complete: "
                    "give the whole JSON object again, shorter"
                )
                text = text[:ECHOED_CUT] + " [cut off]"
            else:
                try:
                    return model.model_validate_json(extract_json(text))
                except ValidationError as exc:
                    error = (
                        str(exc).splitlines()[0]
                        + ": "
                        + "; ".join(e["msg"] for e in exc.errors()[:3])
                    )
            messages += [
                {"role": "assistant", "content": text},
                {"role": "user", "content": self._render("repair.j2", {"error": error})},
            ]
        raise BrainError(f"no valid answer after {self._max_repairs} repairs: {error}")

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        tools: list[dict[str, Any]] | None = None,
        response_format: dict[str, Any] | None = None,
        stop: list[str] | None = None,
        temperature: float = 0.0,
        timeout: float | None = None,
        cache: ResponseCache | None = None,
        sample: int = 0,
    ) -> Completion:
        """One chat completion (the `openai` client retries 429, 5xx and time-outs with backoff first).
        EndpointDown when the endpoint does not answer, BudgetSpent when the run's LLM time is spent,
        BrainError for any other refusal. With a `cache`, a request asked before is answered from it
        and costs nothing. `timeout` can only shorten the client's own (a budget's remaining
        seconds), and so does what is left of the run's budget; `stop` ends the answer where a
        prompted format hands over to the caller (ReAct's "Observation:"). Every request is bounded
        by `max_tokens` (llama.cpp and Ollama otherwise let a model talk until the time-out), and
        its messages are shaped for strict chat templates (dbcrew/llm/messages.py)."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": template_safe(messages, tools_mode=bool(tools)),
            "temperature": temperature,
            "max_tokens": max_tokens,
        }
        if tools:
            request["tools"] = tools
        if response_format:
            request["response_format"] = response_format
        if stop:
            request["stop"] = stop
        key = ResponseCache.key({**request, "sample": sample}) if cache is not None else ""
        if cache is not None and (hit := cache.get(key)) is not None:
            return Completion(hit.text, hit.tool_calls, cached=True)
        left = self.budget_seconds - self.spent_seconds
        if left <= 0:
            raise BudgetSpent(f"the run's LLM time budget of {self.budget_seconds:g} s is spent")
        # What is left of a budget (the run's, or the caller's `timeout`: a diagnosis's own seconds)
        # bounds this request, retries included: a request cut by a budget is not retried, and its
        # time-out is that budget spent, not the endpoint down.
        limit = min(timeout or self.timeout, self.timeout, left)
        cut_by_budget = limit < self.timeout
        client = self._client.with_options(max_retries=0) if cut_by_budget else self._client
        started = time.monotonic()
        try:
            response = client.chat.completions.create(**request, timeout=limit)
        except openai.APITimeoutError as exc:
            if cut_by_budget:
                raise BudgetSpent(
                    f"the run's LLM time budget of {self.budget_seconds:g} s is spent"
                    if limit == left
                    else f"the caller's time budget is spent ({limit:.3g} s were left to it)"
                ) from exc
            raise EndpointDown(f"{type(exc).__name__}: {exc}") from exc
        except openai.APIConnectionError as exc:
            raise EndpointDown(f"{type(exc).__name__}: {exc}") from exc
        except openai.APIError as exc:
            raise BrainError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            self.spent_seconds += time.monotonic() - started
        self.usage.calls += 1
        prompt, completion = (
            (response.usage.prompt_tokens, response.usage.completion_tokens)
            if response.usage
            else (0, 0)
        )
        self.usage.prompt_tokens += prompt
        self.usage.completion_tokens += completion
        message = response.choices[0].message if response.choices else None
        calls = (
            tuple(
                FunctionCall(c.id, c.function.name, c.function.arguments or "")
                for c in (message.tool_calls or [])
                if c.type == "function"
            )
            if message
            else ()
        )
        truncated = bool(response.choices) and response.choices[0].finish_reason == "length"
        answer = Completion(
            (message.content or "") if message else "",
            calls,
            prompt,
            completion,
            truncated=truncated,
        )
        if cache is not None:
            cache.put(key, answer)
        return answer
