"""The HTML report of a demo-like storage opened in headless Chromium: every image decodes and
the page is not blank."""

from __future__ import annotations

import base64
import io
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from dltune.report import render_html

pytestmark = pytest.mark.slow

_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--disable-dev-shm-usage"]
# Appended to a copy of the page (the report itself has no script): after load, the title says
# how many images decoded with a non-zero size.
_PROBE = """<script>window.addEventListener('load', () => {
const imgs = [...document.images];
const ok = imgs.filter(i => i.complete && i.naturalWidth > 0).length;
document.title = 'images ' + ok + '/' + imgs.length;});</script>"""


@pytest.fixture(scope="module")
def chromium():
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed (apt-get install -y chromium); CI must run this test")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return path


def _run(chromium, tmp_path, *args, timeout=120):
    profile = tmp_path / "profile"
    return subprocess.run([chromium, *_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)


def test_screenshot_is_not_blank(chromium, demo_report, tmp_path):
    from PIL import Image

    page = tmp_path / "report.html"
    page.write_text(render_html(demo_report), encoding="utf-8")
    shot = tmp_path / "shot.png"
    proc = _run(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1200,3000",
                page.as_uri())
    assert shot.exists(), proc.stderr[-2000:]
    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("L"), dtype=float)
    assert pixels.shape == (3000, 1200)
    assert pixels.std() > 10
    assert (pixels < 200).mean() > 0.02  # text, tables and plots, not an empty white page


def test_every_image_renders(chromium, demo_report, tmp_path):
    page = tmp_path / "probe.html"
    page.write_text(render_html(demo_report).replace("</body>", _PROBE + "</body>"), encoding="utf-8")
    proc = _run(chromium, tmp_path, "--dump-dom", "--virtual-time-budget=10000", page.as_uri())
    dom = proc.stdout
    assert "<html" in dom, proc.stderr[-2000:]
    sources = re.findall(r'<img [^>]*src="([^"]+)"', dom)
    assert len(sources) == len(demo_report.figures) > 0
    for src in sources:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    n = len(demo_report.figures)
    assert f"<title>images {n}/{n}</title>" in dom
