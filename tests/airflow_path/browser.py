"""Headless Debian Chromium driven by playwright, with the flags that work on this kind of machine,
signed into a running Airflow's UI as a person would; screenshots of each page land in
artifacts/browser/, whether the test passes or not.

playwright brings its driver but not a browser here (nothing may be downloaded outside the
package registries), so it launches the distribution's ``chromium`` package, installed on
first use when it is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import Page, expect, sync_playwright

from dev.airflow_stack.home import REPO
from dev.airflow_stack.running import USERNAME, RunningAirflow

ARTIFACTS = REPO / "artifacts" / "browser"
# Generous: the first page load compiles the UI's scripts on a loaded two-core machine.
UI_TIMEOUT_MS = 60_000

# No sandbox (we run as root), no GPU, and nothing that phones home.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_executable() -> str:
    """The path of Debian's chromium, installing the package with apt-get if it is missing."""
    found = shutil.which("chromium")
    if found:
        return found
    if os.geteuid() != 0:
        pytest.fail(
            "The browser test needs Debian's chromium package and cannot install it without root. "
            "Install it with `sudo apt-get install chromium`, then run the tests again."
        )
    environment = os.environ | {"DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        result = subprocess.run(command, env=environment, capture_output=True, text=True)
        if result.returncode:
            pytest.fail(
                f"`{' '.join(command)}` failed with exit code {result.returncode}, so the browser "
                f"test has no browser:\n{result.stdout[-1500:]}{result.stderr[-1500:]}"
            )
    found = shutil.which("chromium")
    if not found:
        pytest.fail("apt-get installed chromium, yet no `chromium` is on PATH.")
    return found


@contextmanager
def signed_in_page(airflow: RunningAirflow) -> Iterator[Page]:
    """A browser page logged into the UI of ``airflow`` through its sign-in form."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_executable(), args=CHROMIUM_FLAGS
        )
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})
            page.set_default_timeout(UI_TIMEOUT_MS)
            expect.set_options(timeout=UI_TIMEOUT_MS)
            page.goto(f"{airflow.site.base_url}/")
            with screenshot(page, "01-sign-in"):
                page.get_by_label("Username").fill(USERNAME)
                page.get_by_label("Password").fill(airflow.password)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(f"{airflow.site.base_url}/")
            yield page
        finally:
            browser.close()


@contextmanager
def screenshot(page: Page, name: str) -> Iterator[None]:
    """Save what the page shows once the block ends, passed or failed, for a person to look at."""
    try:
        yield
    finally:
        page.screenshot(path=ARTIFACTS / f"{name}.png", full_page=True, animations="disabled")
