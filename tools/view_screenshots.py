"""The workbench's screenshots in the manual (docs/images/view-*.png), taken by Playwright in
headless chromium from a real ``agentv view`` over the example store of
``tools/view_example.py`` (one answer reviewed). ``make screenshots`` runs it; run it again
whenever the pages change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

TOOLS = Path(__file__).resolve().parent
IMAGES = TOOLS.parent / "docs" / "images"
CHROMIUM = os.environ.get("AGENTV_CHROMIUM", "/usr/bin/chromium")
#: (file, path on the workbench, height of the picture; 0: the whole page)
SHOTS = (
    ("view-runs.png", "/", 900),
    ("view-run.png", "/runs/2?status=failed", 760),
    ("view-record.png", "/runs/2/records/{live}", 0),
    ("view-compare.png", "/compare?base=1&new=2", 640),
    ("view-queue.png", "/queue", 520),
)


def main() -> int:
    sys.path.insert(0, str(TOOLS))
    import view_example

    from agentv.api import open_store
    from agentv.store import RecordQuery

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        view_example.make_history(root)
        with open_store(cwd=root) as store:
            (row,) = [
                r for r in store.records(2, RecordQuery()).rows if r.eval_id == "remembers-name"
            ]
            store.review(
                2,
                json.dumps(row.case_key, separators=(",", ":")),
                row.repeat,
                verdict="fail",
                score=0.2,
                comment="Greets, but forgets the name on the second turn.",
                reviewer="Ada",
            )
        view = subprocess.Popen(
            [sys.executable, "-m", "agentv", "view", "--no-open", "--reviewer", "Ada"],
            cwd=root,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert view.stdout is not None
            url = view.stdout.readline().split(": ", 1)[1].strip().rstrip("/")
            from playwright.sync_api import sync_playwright

            IMAGES.mkdir(parents=True, exist_ok=True)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=CHROMIUM, args=["--headless=new", "--no-sandbox"]
                )
                page = browser.new_page(viewport={"width": 1200, "height": 800})
                for name, path, height in SHOTS:
                    page.set_viewport_size({"width": 1200, "height": height or 800})
                    page.goto(url + path.format(live=row.seq))
                    page.wait_for_selector("body[data-ready='1']")
                    page.screenshot(path=str(IMAGES / name), full_page=not height)
                    print(f"docs/images/{name}")
                browser.close()
        finally:
            view.terminate()
            view.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
