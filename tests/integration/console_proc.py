"""`odradek console` as a subprocess, and a headless Chromium driven by selenium:
what the console's browser tests and scripts/console_screenshots share.

The console runs the checked-out code (PYTHONPATH is this repository first, as the
broker fixtures do) on a free loopback port; `ConsoleProcess.url` is its address
once it printed it. `chrome()` is Debian's chromium through /usr/bin/chromedriver
(`.ci/run` installs both); `browser_available()` says why not when they are missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.integration.broker_proc import HOST, REPO_ROOT, free_port, port_accepts

CHROMEDRIVER = "/usr/bin/chromedriver"
CHROMIUM = "/usr/bin/chromium"
START_TIMEOUT_S = 30.0


class ConsoleProcess:
    def __init__(self, bootstrap: str, log_path: Path, *extra: str) -> None:
        self.port = free_port()
        self.started = time.monotonic()
        self.url = f"http://{HOST}:{self.port}"
        self.env = env = dict(os.environ)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + path if path else "")
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115 (closed in close())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "console", "--bootstrap-server", bootstrap,
             "--listen", f"{HOST}:{self.port}", *extra],
            stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO_ROOT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_accepts(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"odradek console did not start:\n{self.log()}")
            time.sleep(0.1)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def browser_available() -> str | None:
    """None when a browser test can run, else why not."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[test]')"
    for binary in (CHROMEDRIVER, CHROMIUM):
        if not Path(binary).exists() and not shutil.which(Path(binary).name):
            return f"{binary} is missing (apt-get install chromium chromium-driver)"
    return None


def chrome(width: int = 1280, height: int = 900) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--disable-extensions", "--no-first-run", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.binary_location = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium") or ""
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    return driver
