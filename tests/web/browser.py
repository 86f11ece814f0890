"""A headless Debian Chromium driven by Selenium through Debian's chromedriver (nothing is
downloaded: Selenium Manager is never asked, the driver's path is given) and a `vgpu inspect
--serve` process to point it at.

Without chromium, chromedriver or Selenium the browser tests are skipped locally; with CI=true
they fail instead: CI must never pass by skipping the browser (`.ci/run` installs both).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,900",
)


def _not_available(reason: str) -> NoReturn:
    if os.environ.get("CI") == "true":
        pytest.fail(f"browser tests cannot run in CI: {reason}", pytrace=False)
    pytest.skip(f"browser tests: {reason}")


@contextmanager
def chromium(*, javascript: bool = True) -> Iterator[Any]:
    """A fresh headless Chromium (its own profile directory), closed after use; with
    `javascript` False, one that runs no script (the pages must work without)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not path.exists():
            _not_available(f"{path} is missing (apt-get install chromium chromium-driver)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ModuleNotFoundError:
        _not_available("the Python package selenium is missing (pip install -e '.[test]')")
    with tempfile.TemporaryDirectory(prefix="vgpu-chromium-") as profile:
        options = webdriver.ChromeOptions()
        options.binary_location = str(CHROMIUM)
        for flag in (*FLAGS, f"--user-data-dir={profile}"):
            options.add_argument(flag)
        if not javascript:
            prefs = {"profile.managed_default_content_settings.javascript": 2}
            options.add_experimental_option("prefs", prefs)
        driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
        try:
            yield driver
        finally:
            driver.quit()


@contextmanager
def serving(snapshot: Path | None, *flags: str) -> Iterator[str]:
    """`vgpu inspect --serve` on a free port, re-reading every second, over `snapshot` (None:
    the cluster `flags` name, e.g. --kubeconfig); its URL."""
    command = [sys.executable, "-m", "vgpu.inspect.cli", "--serve", "--port", "0",
               "--refresh", "1", *flags]  # fmt: skip
    if snapshot is not None:
        command += ["--fake-cluster", str(snapshot)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        line = process.stdout.readline()  # "Serving the vgpu view on http://...:PORT/ ..."
        url = next((w for w in line.split() if w.startswith("http://")), "")
        assert url, f"no URL in the server's first line: {line!r}"
        yield url.rstrip("/")
    finally:
        process.terminate()
        process.wait(timeout=10)


def screenshots(tmp: Path) -> Path:
    """Where the pages' screenshots go: $VGPU_SCREENSHOTS (CI keeps it as an artifact), else a
    folder of the test run's own."""
    folder = Path(os.environ.get("VGPU_SCREENSHOTS") or tmp)
    folder.mkdir(parents=True, exist_ok=True)
    return folder
