"""report.html: one self-contained file with every plot, PNGs beside it, rendered in headless Chromium without errors."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import numpy as np
from matplotlib.image import imread

from specdoctor.report import render_html, write_report
from specdoctor.report.model import Report
from specdoctor.report.plots import render_plots


def _non_blank(png: Path) -> float:
    """Fraction of pixels that differ from the page background (white)."""
    img = imread(png)[..., :3]
    return float(np.mean(np.any(np.abs(img - 1.0) > 0.02, axis=-1)))


def test_html_is_self_contained(seed: Report) -> None:
    html = render_html(seed)
    assert not re.search(r"https?://|//[a-z0-9.-]+\.[a-z]{2,}/", html, flags=re.I), "external URL in report.html"
    assert "<script" not in html and "<link" not in html and "@import" not in html
    imgs = re.findall(r'<img [^>]*src="([^"]+)"', html)
    assert len(imgs) == 4 and all(src.startswith("data:image/png;base64,") for src in imgs)
    for key in ("waterfall", "throughput", "breakeven", "nccl"):
        assert f'id="plot-{key}"' in html
    assert "no data" not in html
    assert "hf_abcdefghijklmnop" not in html


def test_plots_are_real_pngs(seed: Report, tmp_path: Path) -> None:
    plots = render_plots(seed)
    assert set(plots) == {"waterfall", "throughput", "breakeven", "nccl"}
    for key, b64 in plots.items():
        p = tmp_path / f"{key}.png"
        p.write_bytes(base64.b64decode(b64))
        img = imread(p)
        assert img.shape[0] > 200 and img.shape[1] > 400
        assert _non_blank(p) > 0.02, f"{key} plot is blank"


def test_plots_are_written_beside_report_md(code_regression: Report, tmp_path: Path) -> None:
    paths = write_report(code_regression, tmp_path / "run")
    pngs = sorted(p.name for p in (tmp_path / "run").glob("*.png"))
    assert pngs == ["bisection.png", "throughput.png", "waterfall.png"]
    md = paths["md"].read_text()
    for name in pngs:
        assert f"]({name})" in md                   # report.md shows each picture
        assert imread(tmp_path / "run" / name).shape[1] > 400
    assert paths["commands"].name == "commands.md" and paths["commands"].exists()


def test_breakeven_plot_has_data_with_only_the_cycle_time(seed: Report, tmp_path: Path) -> None:
    """A run that measured τ and the two throughputs, but not draft/verify times, still draws the chart."""
    assert seed.breakeven is not None
    seed.breakeven = seed.breakeven.model_copy(update={"predictions": [], "draft_ms": None, "verify_ms": None,
                                                       "cycle_source": "throughput"})
    p = tmp_path / "b.png"
    p.write_bytes(base64.b64decode(render_plots(seed)["breakeven"]))
    assert _non_blank(p) > 0.02
    seed.breakeven = None
    assert "breakeven" not in render_plots(seed)


def test_html_renders_in_chromium(seed: Report, tmp_path: Path, chromium_shot) -> None:
    paths = write_report(seed, tmp_path / "run")
    png, console = chromium_shot(paths["html"])
    assert console == [], console
    img = imread(png)
    assert img.shape[:2] == (2000, 1280)
    assert _non_blank(png) > 0.05
    assert float(np.std(img[..., :3])) > 0.05


def test_chromium_check_catches_errors_and_blank_pages(tmp_path: Path, chromium_shot) -> None:
    """The detector must be able to fail: a script error is reported and an empty page reads as blank."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>throw new Error("boom")</script></body></html>')
    png, console = chromium_shot(bad, size="400,300")
    assert any("Uncaught Error: boom" in line for line in console)
    assert _non_blank(png) < 0.01
