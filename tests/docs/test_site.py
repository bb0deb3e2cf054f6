"""The docs site as a reader sees it: the built site (mkdocs build --strict) served on
localhost and opened in headless Chromium, with no network. The front page, a reference
page and the flow diagram render; search finds an option, in its index and in the page's
search box. Screenshots land in $HPC_DOCS_SHOTS (default tests/.tmp/docs_site/).

Run by `bash tests/run_tests.sh lint`, which builds the site first and passes it as
HPC_DOCS_SITE; alone: `$HPC_TEST_VENV/bin/python -m pytest tests/docs` (builds it into a temp folder).
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import cdp  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("HPC_DOCS_SHOTS", ROOT / "tests/.tmp/docs_site"))


def reference_long_options() -> list[str]:
    """The long options of the reference's Options table (docs/reference.md), e.g. --gpu-type."""
    text = (ROOT / "docs/reference.md").read_text()
    table = text.split("\n## Options\n", 1)[1].split("\n## ", 1)[0]
    return sorted({m.group(1) for m in re.finditer(r"^\| `(?:-\w, )?(--[\w-]+)", table, re.M)})


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("HPC_DOCS_SITE")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        check=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    return out


@pytest.fixture(scope="session")
def base_url(site: Path) -> Iterator[str]:
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@pytest.fixture(scope="session")
def browser() -> Iterator[cdp.Browser]:
    binary = cdp.chromium_path()
    assert binary, "no chromium on PATH: install Debian's package (tests/setup/install_deps.sh does)"
    b = cdp.Browser(binary)
    yield b
    b.close()


def only_local(urls: list[str], base_url: str) -> list[str]:
    """The URLs a page asked for that are not on the local server (nor data:/blob:)."""
    return [u for u in urls if not u.startswith((base_url, "data:", "blob:", "about:"))]


def svg_diagrams(browser: cdp.Browser) -> list[dict]:
    """The rendered mermaid diagrams: <svg> elements holding the flow's labels (Material
    draws them inside a closed shadow root, which only the DevTools protocol can see)."""
    return [
        n
        for n in cdp.nodes(browser.dom())
        if n.get("nodeName") == "svg" and "job_submitter.sh" in cdp.text_of(n)
    ]


def test_numbered_steps_stay_one_list(site: Path) -> None:
    """Each numbered list of a page renders as one <ol> (a list that starts at "1." once in
    the Markdown): a step's code block indented less than 4 spaces ends the list, and every
    later step showed "1." again (first-job.md did)."""
    broken = []
    for md in sorted((ROOT / "docs").glob("*.md")):
        html_path = site / md.stem / "index.html"
        if not html_path.exists():
            continue
        lists = len(re.findall(r"^ *1\. ", md.read_text(), re.M))
        html = html_path.read_text()
        article = html[html.find("<article") : html.find("</article>")]
        rendered = len(re.findall(r"<ol[ >]", article))
        if rendered != lists:
            broken.append(f"{md.name}: {lists} list(s) in the Markdown, {rendered} <ol> on the page")
    assert not broken, "indent a step's lines and code blocks by 4 spaces: " + "; ".join(broken)


def test_search_index_holds_every_option_of_the_reference(site: Path) -> None:
    index = json.loads((site / "search/search_index.json").read_text())
    reference = " ".join(
        d["title"] + " " + d["text"] for d in index["docs"] if d["location"].startswith("reference/")
    )
    options = reference_long_options()
    assert len(options) > 30, options
    missing = [o for o in options if o not in reference]
    assert not missing, f"not in the search index of the reference page: {missing}"


def test_front_page_renders_with_navigation_and_copy_buttons(browser: cdp.Browser, base_url: str) -> None:
    browser.open(base_url)
    assert browser.js("document.querySelector('h1').firstChild.textContent.trim()") == "hpc_files"
    assert browser.js("document.title").startswith("hpc_files")
    nav = browser.js("[...document.querySelectorAll('.md-nav--primary a')].map(a => a.textContent.trim())")
    for page in ("Your first job", "Sweeps", "Reference", "How it works"):
        assert page in nav, nav
    # content.code.copy: Material adds a copy button to each code block (by script)
    blocks = browser.js("document.querySelectorAll('pre > code').length")
    assert blocks >= 3
    browser.wait_for(
        lambda: (
            browser.js("document.querySelectorAll('pre button[title=\"Copy to clipboard\"]').length")
            == blocks
        ),
        "a copy button on every code block",
    )
    diagrams = browser.wait_for(lambda: svg_diagrams(browser), "the flow diagram drawn as an SVG")
    labels = cdp.text_of(diagrams[0])
    for label in (
        "sbatch --parsable",
        "Slurm queue",
        "checkpoint",
        "requeue",
        "FAILED, exit 124",
        "hpc status",
    ):
        assert label in labels
    browser.screenshot(SHOTS / "front_page.png")
    assert not only_local(browser.requested_urls(), base_url), "the page fetched from the network"


def test_reference_page_renders_its_tables_and_anchors(browser: cdp.Browser, base_url: str) -> None:
    browser.open(base_url + "reference/")
    assert browser.js("document.querySelector('h1').firstChild.textContent.trim()") == "Reference"
    for anchor in (
        "options",
        "environment-variables",
        "profile-settings",
        "folders-and-files-the-toolkit-makes",
        "exit-codes",
        "cleanup-options",
    ):
        assert browser.js(f"!!document.getElementById('{anchor}')"), anchor
    rows = browser.js("[...document.querySelectorAll('table tr')].map(r => r.textContent)")
    assert any("--gpu-type TYPE" in r and "GPU model" in r for r in rows)
    assert browser.js("document.querySelectorAll('.md-sidebar--secondary .md-nav__link').length") >= 6
    browser.screenshot(SHOTS / "reference.png", full_page=False)
    assert not only_local(browser.requested_urls(), base_url)


def test_how_it_works_draws_the_same_diagram(browser: cdp.Browser, base_url: str) -> None:
    browser.open(base_url + "how-it-works/")
    diagrams = browser.wait_for(lambda: svg_diagrams(browser), "the flow diagram drawn as an SVG")
    assert len(diagrams) == 1
    browser.screenshot(SHOTS / "how_it_works.png", full_page=False)


def test_search_box_finds_an_option(browser: cdp.Browser, base_url: str) -> None:
    browser.open(base_url)
    browser.js("document.querySelector('input.md-search__input').focus()")
    browser.type("signal-grace")
    results = browser.wait_for(
        lambda: browser.js(
            "[...document.querySelectorAll('.md-search-result__item a')]"
            ".map(a => [a.getAttribute('href'), a.textContent])"
        ),
        "search results",
    )
    assert any("reference/" in href and "signal-grace" in text for href, text in results), results
    browser.screenshot(SHOTS / "search.png", full_page=False)
    assert not only_local(browser.requested_urls(), base_url)
