"""deployments/README.md's `prefect deploy` steps, run line by line as written (on a free port instead of 4200)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dbcrew.cli.server import stop_tree
from dbcrew.lab.embedded import EmbeddedPostgres, _free_port
from tests.e2e.test_operate import poll

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parents[2]
BACKGROUND = "in its own terminal"


def documented_steps() -> list[str]:
    text = (ROOT / "deployments" / "README.md").read_text()
    block = re.search(r"<!-- steps -->\s*```bash\n(.*?)```\s*<!-- /steps -->", text, re.S)
    assert block, "deployments/README.md lost its steps block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_readme_steps_deploy_and_run_a_review(fleet_pg: EmbeddedPostgres, tmp_path: Path):
    from dbcrew.cli.server import healthy

    port = _free_port()
    fleet_pg.psql("CREATE DATABASE readme_shop;")
    (tmp_path / "deployments").mkdir()
    shutil.copy(ROOT / "deployments" / "prefect.yaml", tmp_path / "deployments" / "prefect.yaml")
    (tmp_path / "targets.yaml").write_text(
        f"targets:\n  - name: shop\n    url: {fleet_pg.dsn('readme_shop')}\n    window: 1\n"
    )
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "PREFECT_HOME": str(tmp_path / "home"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_WORKER_QUERY_SECONDS": "1",
        "DBCREW_REPORTS_DIR": str(tmp_path / "reports"),
    }
    env.pop("PREFECT_API_URL", None)
    background: list[subprocess.Popen[bytes]] = []
    log = (tmp_path / "background.log").open("wb")
    try:
        for step in documented_steps():
            line = step.replace("4200", str(port))
            if line.startswith("export "):
                name, _, value = line.removeprefix("export ").partition("=")
                env[name] = value
            elif BACKGROUND in line:
                background.append(
                    subprocess.Popen(
                        ["bash", "-c", line],
                        env=env,
                        cwd=tmp_path,
                        stdout=log,
                        stderr=log,
                        start_new_session=True,
                    )
                )
                if "server start" in line:
                    poll(
                        lambda: healthy(env["PREFECT_API_URL"]),
                        "the documented server to answer",
                        attempts=180,
                    )
            else:
                result = subprocess.run(
                    ["bash", "-c", line],
                    env=env,
                    cwd=tmp_path,
                    capture_output=True,
                    text=True,
                    timeout=600,
                )
                assert result.returncode == 0, (
                    f"{step}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
                )
        assert "finished successfully in 'Completed'" in result.stdout, result.stdout[-2000:]
        assert list((tmp_path / "reports").glob("*/report.json")), "the worker wrote no report"
        assert not list((tmp_path / "reports").glob("*/workspace.duckdb*")), "a workspace stayed"
    finally:
        for process in reversed(background):
            stop_tree(process)
        log.close()
