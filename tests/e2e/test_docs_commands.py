"""Every command the README and the docs show is run here, as written, and ends as documented.

The convention, for whoever writes a page (README.md, docs/*.md, deployments/README.md):
- A runnable example is a ```console block. `$ ` starts a command; the lines after it are what it
  prints, trimmed with `...` where long. Inline code in prose is reference syntax (`dbcrew history
  TARGET`), not an example.
- `$ echo $?` after a command documents its exit code (the line after it); without it, 0.
- A `^C` line in a command's output marks a long-running command: it is started, checked ready
  (run_long says how), interrupted with SIGINT as Ctrl-C would, and its exit code checked.
- A printed line without digits (counts, ports, times and ids vary) must appear, as written, in
  what the command printed; lines with digits and `...` are not compared.
- `$ make ...` is covered by make itself, not run here: `make demo` runs the demo (its output in
  the README is pasted from a real run), `make test` runs this suite, `make bench` the benchmarks.
- `$ dbcrew ...` runs what `python -m dbcrew.cli ...` runs, the entry point `dbcrew.cli.app.main`, in this process
  (tests/cli_here.py: its exit code, what it printed; a fresh interpreter per command cost 1-3 s of
  imports each, the manual's and the router's libraries on every `ask`); a `^C` command runs as
  `python -m dbcrew.cli` in a process of its own, to be signalled. The process itself (its exit status, one
  line on stderr, signals, children) is tests/e2e/test_cli*.py's. `$ python ...` runs this
  interpreter; NAME=VALUE before the program goes to its environment. NOT_RUN lists the few commands
  that only make sense elsewhere.
- deployments/README.md's `prefect deploy` steps are a ```bash block, run line by line by
  tests/e2e/test_prefect_yaml.py.

One substitution: the example target's `db.example.com:5432` becomes the test cluster's
`127.0.0.1:<port>`, a cluster holding the database `shop` (the planted demo shop, without its
workload) and the role `monitor`, created by docs/security.md's own statement. `targets.yaml` is
docs/operate.md's inventory example, with the same substitution.

All commands run in one working directory with one store, README.md first, then docs/*.md by
name, so a page may use what an earlier command left (history after a review, a baseline file);
a command shown twice runs once. Every command gets PREFECT_API_URL of the session's Prefect test
server (tests/conftest.py), so reviews go through a running server as they do beside `dbcrew
server`, with no ephemeral server each. `dbcrew server` gets `--port` of that same server and
reuses it (the docs' "reuses the one answering there"); it cannot be tests/e2e/conftest.py's
crew_server, whose published inventory the operate tests read and the docs' inventory would
replace. `dbcrew mcp --port 8765` gets a free port.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from dbcrew.lab.embedded import EmbeddedPostgres, _free_port
from dbcrew.lab.shop import DemoShop
from dbcrew.operators.docs import DEBIAN_MANUAL
from tests.cli_here import dbcrew_here

pytestmark = [pytest.mark.prefect, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE_HOST = "db.example.com:5432"
MCP_PORT = "8765"
NOT_RUN = {
    "PREFECT_API_URL=http://SERVER:4200/api prefect worker start --pool dbcrew": "a worker on another machine; tests/e2e/test_prefect_yaml.py starts"
    " `prefect worker start --pool dbcrew` as deployments/README.md's steps say",
}
CONSOLE = re.compile(r"^(?P<indent>[ \t]*)```console\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)


def documents() -> list[Path]:
    return [
        ROOT / "README.md",
        *sorted((ROOT / "docs").glob("*.md")),
        ROOT / "deployments" / "README.md",
    ]


@dataclass
class Example:
    where: str
    command: str
    output: list[str] = field(default_factory=list)
    exit_code: int = 0
    interrupted: bool = False


def examples(path: Path) -> list[Example]:
    return examples_in(path.read_text(), str(path.relative_to(ROOT)))


def examples_in(text: str, name: str) -> list[Example]:
    found: list[Example] = []
    for block in CONSOLE.finditer(text):
        first = text.count("\n", 0, block.start("body")) + 1
        code_follows = False
        for number, line in enumerate(textwrap.dedent(block["body"]).splitlines(), first):
            if line.startswith("$ ") and line[2:].strip() == "echo $?":
                code_follows = True
            elif line.startswith("$ "):
                found.append(Example(f"{name}:{number}", line[2:].strip()))
            elif not found:
                raise AssertionError(f"{name}:{number}: output before any `$ ` command")
            elif code_follows:
                found[-1].exit_code, code_follows = int(line), False
            elif line == "^C":
                found[-1].interrupted = True
            else:
                found[-1].output.append(line)
    return found


def test_the_convention_is_parsed_as_written():
    """The parser itself, on each kind of line (the docs test is only as good as it)."""
    page = (
        "x\n\n- a list item:\n\n  ```console\n  $ dbcrew a\n  one\n  ...\n  $ echo $?\n  2\n"
        "  ```\n\n```console\n$ dbcrew b\n^C\nstopped\n```\n"
    )
    got = examples_in(page, "probe.md")
    assert [(e.command, e.output, e.exit_code, e.interrupted) for e in got] == [
        ("dbcrew a", ["one", "..."], 2, False),
        ("dbcrew b", ["stopped"], 0, True),
    ]
    assert [e.where for e in got] == ["probe.md:6", "probe.md:14"]


LINK = re.compile(r"\]\((?!https?:)([^)#\s]*)(?:#([^)\s]*))?\)")


def headings(path: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    titles = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", path.read_text(), flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", title.lower()).strip().replace(" ", "-") for title in titles}


def test_the_readme_is_a_first_page_and_every_link_lands():
    assert len((ROOT / "README.md").read_text().splitlines()) < 160
    broken = []
    for page in documents():
        for target, anchor in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
            path = (page.parent / target).resolve() if target else page
            if not path.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
            elif anchor and anchor not in headings(path):
                broken.append(f"{page.relative_to(ROOT)}: {target}#{anchor}")
    assert not broken, broken


@dataclass
class Lab:
    """Where and against what the examples run."""

    cwd: Path
    env: dict[str, str]
    host: str
    prefect_port: int


def argv(command: str) -> tuple[list[str], dict[str, str]]:
    words = shlex.split(command)
    env: dict[str, str] = {}
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    program, args = words[0], words[1:]
    if program == "dbcrew":
        return [sys.executable, "-m", "dbcrew.cli", *args], env
    if program == "python":
        return [sys.executable, *args], env
    raise AssertionError(f"`{command}`: no rule runs {program}; add one, or list it in NOT_RUN")


def wait_ready(
    process: subprocess.Popen[str],
    printed: list[str],
    ready: Callable[[], bool],
    timeout: float = 180,
) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, f"exited {process.returncode}: {''.join(printed)}"
        assert time.monotonic() < deadline, f"not ready in {timeout:.0f} s: {''.join(printed)}"
        time.sleep(0.5)


def answers_http(port: str) -> Callable[[], bool]:
    def check() -> bool:
        try:
            httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1.0)
            return True
        except httpx.HTTPError:
            return False

    return check


def run_long(args: list[str], lab: Lab, env: dict[str, str]) -> tuple[int, str]:
    """Start a long-running command, wait until it is ready, Ctrl-C it: (exit code, its output).

    `dbcrew server` is ready when it says "press Ctrl-C"; `dbcrew mcp` when its port answers."""
    command = args[3]
    if command == "server":
        args = [*args, "--port", str(lab.prefect_port)]
    elif command == "mcp":
        port = str(_free_port())
        args = [port if a == MCP_PORT else a for a in args]
    else:
        raise AssertionError(f"no readiness rule for dbcrew {command}: add one to run_long")
    process = subprocess.Popen(
        args, cwd=lab.cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    printed: list[str] = []
    try:
        if command == "server":
            assert process.stdout is not None
            for out in process.stdout:
                printed.append(out)
                if out.startswith("press Ctrl-C"):
                    break
            wait_ready(
                process, printed, lambda: True
            )  # its Ctrl-C handler is armed before that line
        else:
            wait_ready(process, printed, answers_http(port))
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, "".join(printed) + rest


def run(example: Example, lab: Lab) -> str | None:
    """None when it ended as documented, else what went wrong."""
    args, extra = argv(example.command.replace(EXAMPLE_HOST, lab.host))
    env = {**lab.env, **extra}
    if example.interrupted:
        code, printed = run_long(args, lab, env)
    elif args[1:3] == ["-m", "dbcrew.cli"]:
        ran = dbcrew_here(*args[3:], env=env, cwd=lab.cwd)
        code, printed = ran.returncode, ran.stdout + ran.stderr
    else:
        result = subprocess.run(
            args, cwd=lab.cwd, env=env, capture_output=True, text=True, timeout=300
        )
        code, printed = result.returncode, result.stdout + result.stderr
    said = f"{example.where}: `{example.command}`"
    if code != example.exit_code:
        return f"{said} exited {code}, documented {example.exit_code}:\n{printed[-3000:]}"
    shown = {line.strip() for line in printed.splitlines()}
    missing = [
        line
        for line in example.output
        if line.strip() not in {"", "..."}
        and not re.search(r"\d", line)
        and line.strip() not in shown
    ]
    if missing:
        return f"{said} did not print {missing}:\n{printed[-3000:]}"
    return None


def sql_block(page: str, starts: str) -> str:
    blocks = re.findall(r"```sql\n(.*?)```", (ROOT / page).read_text(), re.S)
    chosen = [b for b in blocks if b.startswith(starts)]
    assert len(chosen) == 1, f"{page} lost its ```sql block starting {starts!r}"
    return chosen[0]


def inventory_example() -> str:
    page = (ROOT / "docs" / "operate.md").read_text()
    blocks = re.findall(r"```yaml\n(targets:\n.*?)```", page, re.S)
    assert len(blocks) == 1, "docs/operate.md lost its targets.yaml example"
    return blocks[0]


@pytest.fixture()
def lab(
    fleet_pg: EmbeddedPostgres, prefect_server: str, private_store: Path, tmp_path: Path
) -> Iterator[Lab]:
    """The cluster, the working directory and the environment (with the test's own store)."""
    fleet_pg.psql("CREATE DATABASE shop;")
    shop = DemoShop(fleet_pg.dsn("shop")).build()
    fleet_pg.psql(sql_block("docs/security.md", "CREATE ROLE monitor"))
    host = f"127.0.0.1:{fleet_pg.port}"
    work = tmp_path / "docs"
    work.mkdir()
    (work / "targets.yaml").write_text(inventory_example().replace(EXAMPLE_HOST, host))
    port = urlsplit(prefect_server).port
    assert port is not None
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    try:
        yield Lab(cwd=work, env=env, host=host, prefect_port=port)
    finally:
        shop.close()
        fleet_pg.psql("DROP DATABASE shop WITH (FORCE);")
        fleet_pg.psql("DROP ROLE monitor;")


def needs_missing_manual(example: Example) -> bool:
    """A manual question (no --target) needs Debian's postgresql-doc-15 (`make manual`)."""
    return (
        example.command.startswith("dbcrew ask")
        and "--target" not in example.command
        and not DEBIAN_MANUAL.is_dir()
    )


def test_every_documented_command_runs_as_documented(lab: Lab):
    ran: set[str] = set()
    failures: list[str] = []
    for page in documents():
        for example in examples(page):
            if (
                example.command in ran
                or example.command.startswith("make ")
                or example.command in NOT_RUN
            ):
                continue
            if needs_missing_manual(example):
                warnings.warn(
                    f"{example.where}: not run, no PostgreSQL manual (make manual)", stacklevel=1
                )
                continue
            ran.add(example.command)
            started = time.monotonic()
            failure = run(example, lab)
            print(f"{time.monotonic() - started:6.1f} s  {example.where}  {example.command}")
            if failure:
                failures.append(failure)
    assert not failures, "\n\n".join(failures)
    assert len(ran) >= 10, f"only {len(ran)} documented commands ran: did the convention change?"
