"""One real model for the session: SmolLM2-135M-Instruct behind llama.cpp's llama-server.

Both come from wheels (dbcrew/lab/llama_server.py); the model is converted to F16 once per machine. A
server that cannot start fails the tests that need it with its log's last lines: never a skip,
which would let a broken wheel pass as a green run.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dbcrew.lab.llama_server import LlamaServer, LocalModel

# The server's own cap on an answer: a request the run's budget cut is still generated to its end (the
# server notices the closed connection late), and the next test waits for it. SmolLM2 rambles to the
# diagnosis's 600-token step limit in prose modes; capped, its answers come back cut (finish_reason
# "length"), which the client treats as repairable, as it would a real model's.
ANSWER_TOKENS = 256


@pytest.fixture(scope="session")
def llama_session() -> Iterator[LlamaServer]:
    with LlamaServer(LocalModel.SMOLLM2, max_answer_tokens=ANSWER_TOKENS) as server:
        yield server


@pytest.fixture()
def llama(llama_session: LlamaServer) -> LlamaServer:
    """The session's server once idle: a request an earlier test's budget cut is still being
    processed to the end of its batch, and this test's budget must not pay for it."""
    return llama_session.idle()
