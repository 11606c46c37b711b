"""Drive the system's Chromium through Playwright: measure layout, plots and evidence links of a report.html.

Browser builds cannot be downloaded here, so Playwright is pointed at /usr/bin/chromium.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTHS = (1280, 390)

# Elements wider than the viewport, ignoring those inside a box that scrolls sideways on its own (.tw) and
# those hidden in a closed <details>.
_OVERFLOW_JS = """() => {
  const vw = document.documentElement.clientWidth;
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.tw') && !el.classList.contains('tw')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right > vw + 1 || r.left < -1) bad.push(el.tagName + '.' + el.className + ' ' + Math.round(r.right));
  }
  return {vw, scrollWidth: document.documentElement.scrollWidth, bad: bad.slice(0, 10), nbad: bad.length};
}"""

_PLOTS_JS = """() => Array.from(document.querySelectorAll('figure img')).map(img => ({
  id: img.closest('figure').id, w: img.naturalWidth, h: img.naturalHeight, complete: img.complete}))"""

_NODATA_JS = """() => Array.from(document.querySelectorAll('em')).filter(e => e.textContent.includes('no data'))
  .map(e => e.textContent)"""

_EVIDENCE_JS = """() => {
  const out = [];
  for (const d of document.querySelectorAll('details.ev')) {
    d.querySelector('summary').click();
    out.push({open: d.open, commands: d.querySelectorAll('li code').length,
              label: d.querySelector('summary').textContent});
  }
  return out;
}"""


@dataclass
class PageCheck:
    """What one viewport width showed."""

    width: int
    overflow: dict[str, Any]
    verdict_box: dict[str, float] | None
    viewport_height: int
    plots: list[dict[str, Any]]
    no_data: list[str]
    evidence: list[dict[str, Any]]
    clicked: list[bool] = field(default_factory=list)
    overflow_open: dict[str, Any] = field(default_factory=dict)


def check_page(html: Path, screenshot_dir: Path | None = None, name: str = "report",
               widths: tuple[int, ...] = WIDTHS, height: int = 900) -> list[PageCheck]:
    """Open the page at each width; optionally save a first-screen screenshot `<name>-<width>.png`."""
    from playwright.sync_api import sync_playwright

    out: list[PageCheck] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for w in widths:
                page = browser.new_page(viewport={"width": w, "height": height})
                page.goto(html.resolve().as_uri())
                page.wait_for_load_state("load")
                if screenshot_dir is not None:
                    page.screenshot(path=str(screenshot_dir / f"{name}-{w}.png"))
                box = page.locator("p.verdict").first.bounding_box()
                check = PageCheck(width=w, overflow=page.evaluate(_OVERFLOW_JS),
                                  verdict_box=dict(box) if box else None, viewport_height=height,
                                  plots=page.evaluate(_PLOTS_JS), no_data=page.evaluate(_NODATA_JS), evidence=[])
                # Real mouse clicks on the first evidence links, then every link through the DOM.
                summaries = page.locator("details.ev > summary")
                for i in range(min(3, summaries.count())):
                    summaries.nth(i).scroll_into_view_if_needed()
                    summaries.nth(i).click()
                    check.clicked.append(bool(page.locator("details.ev").nth(i).evaluate("d => d.open")))
                    summaries.nth(i).click()
                check.evidence = page.evaluate(_EVIDENCE_JS)
                check.overflow_open = page.evaluate(_OVERFLOW_JS)     # with every evidence block open
                out.append(check)
                page.close()
        finally:
            browser.close()
    return out
