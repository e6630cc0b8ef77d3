"""The Prefect UI, in headless Chromium (Debian's chromium and chromium-driver): a review's report artifact renders."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbcrew.lab.crew_server import CrewServer
from tests.e2e.test_operate import finished

pytestmark = pytest.mark.timeout(900)

CHROMIUM = shutil.which("chromium")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[object]:
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.fail(
            "Debian's chromium and chromium-driver are needed (`make test` installs them as root)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium-profile'}",
        "--window-size=1400,1800",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def review_alpha(api: str) -> tuple[str, str]:
    """Run the on-demand deployment for `alpha` through the API; returns (flow run id, report artifact id)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        ArtifactFilterKey,
    )
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        deployment = client.read_deployment_by_name("review_target/on-demand")
        run = client.create_flow_run_from_deployment(
            deployment.id, parameters={"request": {"target": "alpha", "window": 1}}
        )
        assert finished(client, run.id).is_completed()
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(
                flow_run_id=ArtifactFilterFlowRunId(any_=[run.id]),
                key=ArtifactFilterKey(like_="dbcrew-report-%"),
            )
        )
    return str(run.id), str(artifacts[0].id)


def test_the_review_artifact_renders_in_the_prefect_ui(
    crew_server: CrewServer, browser, tmp_path: Path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    run_id, artifact_id = review_alpha(crew_server.api)
    wait = WebDriverWait(browser, 120)
    browser.get(f"{crew_server.ui}/runs/flow-run/{run_id}")
    wait.until(
        ready.text_to_be_present_in_element((By.TAG_NAME, "body"), "alpha")
    )  # the run page, named after its target
    browser.get(f"{crew_server.ui}/artifacts/artifact/{artifact_id}")
    title = wait.until(
        ready.presence_of_element_located(
            (By.XPATH, "//h1[contains(., 'dbcrew health review of')]")
        )
    )
    assert "postgresql://postgres@127.0.0.1:" in title.text and "/alpha" in title.text
    assert not browser.find_elements(By.CSS_SELECTOR, "a[href^='mailto:']"), (
        "the target's display became an e-mail link"
    )
    table = wait.until(
        ready.presence_of_element_located((By.XPATH, "//table[.//th[contains(., 'code')]]"))
    )
    assert "table_without_primary_key" in table.text
    chart = wait.until(
        ready.presence_of_element_located((By.CSS_SELECTOR, "img[src^='data:image/png']"))
    )
    wait.until(
        lambda _: browser.execute_script(
            "return arguments[0].complete && arguments[0].naturalWidth", chart
        )
    )
    assert browser.execute_script("return arguments[0].naturalWidth", chart) > 100
    shot = tmp_path / "report-artifact.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_report_html_fits_the_page_with_long_sql_and_shows_statements(browser, tmp_path: Path):
    """Unbroken fix SQL and statement texts wrap inside the findings table: nothing runs off the page."""
    from datetime import UTC, datetime

    from dbcrew.models import Finding, Report, Severity
    from dbcrew.models.report import TargetInfo
    from dbcrew.roles.report.reporter import write_report

    columns = ", ".join(f"very_long_column_name_{i}" for i in range(40))
    statement = (
        f"SELECT {columns} FROM public.orders_with_a_very_long_table_name WHERE customer_id = $1"
    )
    findings = [
        Finding(
            code="index_missing",
            severity=Severity.WARNING,
            object="public.orders_with_a_very_long_table_name",
            title="A frequent query scans the table",
            recommendation="Create the index.",
            evidence={"query": statement},
            fix_sql="CREATE INDEX CONCURRENTLY ON public.orders_with_a_very_long_table_name("
            + "x" * 300
            + ");",
        ),
        Finding(
            code="slow_query",
            severity=Severity.WARNING,
            object="queryid:-8412731409716231",
            title="Slow statement",
            evidence={"query": statement},
        ),
    ]
    now = datetime.now(UTC)
    report = Report(
        run_id="wrapcheck",
        target=TargetInfo(kind="postgresql", display="postgresql://postgres@db.example:5432/shop"),
        scenario="health",
        started_at=now,
        finished_at=now,
        brain="rules",
        findings=findings,
    )
    write_report(report, tmp_path)
    browser.set_window_size(1000, 1200)
    browser.get((tmp_path / "report.html").as_uri())
    overflow = browser.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0, f"the page is {overflow} px wider than the window"
    cell = browser.execute_script(
        "return [...document.querySelectorAll('table.findings td')]"
        ".find(td => td.textContent.includes('queryid:')).textContent"
    )
    assert "queryid:-8412731409716231" in cell and "very_long_column_name_39" in cell
    markdown = (tmp_path / "report.md").read_text()  # what the Prefect UI's report artifact shows
    assert markdown.startswith(
        "# dbcrew health review of `postgresql://postgres@db.example:5432/shop`\n"
    )
    # In the Prefect UI's table the statement is plain text that wraps: a code span never breaks a line.
    assert "`queryid:-8412731409716231`<br>SELECT very_long_column_name_0," in markdown
    shot = tmp_path / "report-html.png"
    assert browser.save_screenshot(str(shot))
