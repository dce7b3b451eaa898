"""The search page in a real headless Chromium, against a real HTTP server on a free port.

One browser for the module (start-up is the slow part).  Chromium is Debian's package
(`apt-get install -y chromium`); playwright drives it through ``executable_path`` because its
own browser download cannot reach the network here.  When the browser is missing the tests
fail with the command that installs it: they never skip.

Every view is screenshotted under ``bench/out/screenshots/`` (git-ignored) so a person can look.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from fakes import use_bow_embedder
from live_server import serving
from ranklock import Document, Engine, FilterError
from ranklock.eval.run import evaluate
from ranklock.http import create_app

COLL = "t_browser"
CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parent.parent / "bench" / "out" / "screenshots"
# Without the networking flags Chromium's background connections are refused by a closed network
# and reported as errors; none of them is needed to render a local page.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

NOTES = [
    ("n01", 2024, "en", "Met Oksana Vrell about project Halcyon. We agreed to ship the XJ-900 firmware on April 12."),
    ("n02", 2024, "en", "Lunch with Tobiah Quist at the harbour. He recommended the book Salt Roads."),
    ("n03", 2025, "en", "The board cancelled Halcyon. Oksana Vrell moved to the Lisbon office."),
    ("n04", 2023, "pt", "A Dra. Inês Faria aprovou o orçamento do projeto Halcyon."),
    ("n05", 2024, "en", "Went running along the river in the morning. The water was cold by the harbour."),
    ("n06", 2024, "en", "Bought apples, bread and coffee. Cooked soup for dinner <b>not bold</b>."),
    ("n07", 2022, "en", "Read two chapters of a novel about a harbour town before sleep."),
    ("n08", 2024, "en", "Quarterly review went fine. Nobody mentioned the office move or the firmware."),
]


@pytest.fixture(scope="module")
def base_url(engine: Engine) -> Iterator[str]:
    """`ranklock serve` for a collection embedded with the bag-of-words test embedder: the same app in uvicorn, in a thread."""
    emb = use_bow_embedder(engine)
    engine.create_collection(COLL, fields=["lang:keyword", "year:int"], embedder=emb)
    engine.ingest(COLL, [Document(i, "", body, {"lang": lang, "year": y}) for i, y, lang, body in NOTES], replace=True)
    with serving(create_app(engine)) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if shutil.which("chromium") is None and not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium is not installed ({CHROMIUM} is missing); the browser tests need it. "
            "Install it with `apt-get install -y chromium` (`.ci/run` does this)."
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the playwright package is missing; install the dev extra: make test-deps (pip install -e '.[dev]')."
        )

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A page with its console errors recorded."""

    def __init__(self, browser: Any, base_url: str, width: int = 1100) -> None:
        self.ctx = browser.new_context(
            viewport={"width": width, "height": 900}, permissions=["clipboard-read", "clipboard-write"]
        )
        self.page = self.ctx.new_page()
        self.base = base_url
        self.errors: list[str] = []
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))

    def open(self, query: str = "") -> Any:
        self.page.goto(self.base + "/" + query)
        self.page.wait_for_function("document.querySelectorAll('#collection option').length > 0")
        self.page.select_option("#collection", COLL)
        self.page.wait_for_selector("#fields button")
        return self.page

    def shot(self, name: str) -> None:
        SHOTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)

    def close(self) -> None:
        self.ctx.close()


@pytest.fixture
def page(browser: Any, base_url: str) -> Iterator[Page]:
    p = Page(browser, base_url)
    yield p
    p.close()


def hits(pg: Any) -> list[tuple[str, str]]:
    return [(li.get_attribute("data-doc"), li.get_attribute("data-chunk")) for li in pg.query_selector_all("#hits li")]


def search(pg: Any, q: str, *, filter: str = "", mode: str = "hybrid") -> None:
    pg.fill("#q", q)
    pg.fill("#filter_in", filter)
    pg.select_option("#mode", mode)
    with pg.expect_response(lambda r: r.url.endswith("/api/search")):
        pg.press("#q", "Enter")
    pg.wait_for_function(
        "document.querySelector('#meta').textContent.length > 0 || document.querySelector('.err:not(:empty)')"
    )


def test_search_shows_hits_with_both_branches(page: Page, engine: Engine) -> None:
    pg = page.open()
    assert pg.evaluate("document.activeElement.id") == "q"  # focus starts in the query box
    labels = pg.evaluate(
        "[...document.querySelectorAll('#collection,#mode,#k,#filter_in,#q')].map(e => e.labels[0].textContent.trim().split(/\\s+/)[0])"
    )
    assert labels == ["Query", "Collection", "Mode", "Results", "Filter"]
    fields = pg.eval_on_selector_all("#fields button", "bs => bs.map(b => b.textContent)")
    assert fields == ["lang keyword", "year int"]
    search(pg, "harbour Halcyon firmware")
    want = engine.search(COLL, "harbour Halcyon firmware", k=10)
    assert hits(pg) == [(h.doc_id, str(h.chunk)) for h in want.hits]
    both = [h for h in want.hits if h.lexical_rank is not None and h.semantic_rank is not None]
    assert both, "the query should reach some document through both branches"
    first = pg.query_selector(f"#hits li[data-doc='{both[0].doc_id}']")
    text = first.inner_text()
    assert f"lexical #{both[0].lexical_rank} · BM25 {both[0].lexical_score:.3f}" in text
    assert f"semantic #{both[0].semantic_rank} · distance {both[0].semantic_distance:.3f}" in text
    assert f"fused {both[0].score:.5f}" in text
    # The bar's two segments are the two branches' 1/(60 + rank) shares of 2/(60 + 1).
    widths = first.eval_on_selector_all(".bar span", "els => els.map(e => parseFloat(e.style.width))")
    assert widths == pytest.approx(
        [100 * (1 / (60 + both[0].lexical_rank)) / (2 / 61), 100 * (1 / (60 + both[0].semantic_rank)) / (2 / 61)],
        abs=0.01,
    )
    assert [m.inner_text().lower() for m in first.query_selector_all("mark")]
    assert f"{len(want.hits)} of k=10" in pg.inner_text("#meta")
    # No filter: the count is of the documents searched, not of a filter's matches (issue 45).
    assert f"{want.matching_count} documents searched" in pg.inner_text("#meta")
    assert "match the filter" not in pg.inner_text("#meta")
    # The legend and the modes name every branch of the search (ranklock.search.branches.describe).
    assert pg.inner_text("#legend") == (
        "lexical contribution 1/(k+rank) semantic contribution 1/(k+rank); the bar is the fused RRF score, "
        "full width = rank 1 in every branch. ↑/↓ move through the hits."
    )
    assert pg.eval_on_selector_all("#mode option", "os => os.map(o => o.value)") == ["hybrid", "lexical", "semantic"]
    # Untrusted text is text: a document's "<b>" is shown, never parsed.
    search(pg, "soup dinner", mode="lexical")
    assert pg.query_selector("#hits b") is None and "<b>not bold</b>" in pg.inner_text("#hits")
    # Arrow keys move through the hits and back to the query box.
    pg.focus("#q")
    pg.keyboard.press("ArrowDown")
    assert pg.evaluate("document.activeElement.dataset.doc") == hits(pg)[0][0]
    pg.keyboard.press("ArrowUp")
    assert pg.evaluate("document.activeElement.id") == "q"
    search(pg, "harbour Halcyon firmware")
    page.shot("search")
    assert page.errors == []


def test_bad_filter_is_shown_inline_and_the_page_still_works(page: Page, engine: Engine) -> None:
    pg = page.open()
    search(pg, "harbour", filter="colour = 'red'")
    with pytest.raises(FilterError) as exc:
        engine.search(COLL, "harbour", filter="colour = 'red'")
    assert pg.inner_text("#filter_err") == f"FilterError: {exc.value}"
    assert hits(pg) == [] and pg.inner_text("#search_err") == ""
    page.shot("bad-filter")
    search(pg, "harbour", filter="year >= 2024")
    assert pg.inner_text("#filter_err") == ""
    want = engine.search(COLL, "harbour", k=10, filter="year >= 2024")
    assert hits(pg) == [(h.doc_id, str(h.chunk)) for h in want.hits] and want.hits
    meta = pg.inner_text("#meta")
    assert (
        f"{want.matching_count} documents match the filter" in meta
        and f"complete: {str(want.complete).lower()}" in meta
    )
    # The only console line is the browser's own report of the 400 the bad filter drew.
    assert page.errors == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]


def test_permalink_reproduces_the_same_hits(browser: Any, base_url: str, page: Page) -> None:
    pg = page.open()
    search(pg, "Oksana Halcyon", filter="lang = 'en'", mode="semantic")
    first = hits(pg)
    link = pg.get_attribute("#permalink", "href")
    assert parse_qs(urlparse(link).query) == {
        "collection": [COLL],
        "q": ["Oksana Halcyon"],
        "mode": ["semantic"],
        "k": ["10"],
        "filter": ["lang = 'en'"],
    }
    assert (
        pg.inner_text("#cli")
        == f"ranklock search --mode semantic -k 10 --filter 'lang = '\\''en'\\''' -- {COLL} 'Oksana Halcyon'"
    )
    pg.click("#copy_cli")
    pg.wait_for_function("document.querySelector('#copied').textContent === 'copied'")
    assert pg.evaluate("navigator.clipboard.readText()") == pg.inner_text("#cli")
    pg.click("#copy_link")
    pg.wait_for_function("navigator.clipboard.readText().then(t => t.includes('?collection='))")
    assert pg.evaluate("navigator.clipboard.readText()") == base_url + link
    other = Page(browser, base_url)
    try:
        pg2 = other.page
        with pg2.expect_response(lambda r: r.url.endswith("/api/search")):
            pg2.goto(base_url + link)
        pg2.wait_for_selector("#hits li")
        assert hits(pg2) == first and first
        assert pg2.input_value("#filter_in") == "lang = 'en'" and pg2.input_value("#mode") == "semantic"
        assert other.errors == []
    finally:
        other.close()
    assert page.errors == []


def test_ask_view_cites_chunks_that_link_to_them(page: Page, engine: Engine) -> None:
    pg = page.open()
    pg.click("#tab_ask")
    assert pg.evaluate("document.activeElement.id") == "ask_q"
    pg.fill("#ask_q", "When will the XJ-900 firmware ship?")
    with pg.expect_response(lambda r: r.url.endswith("/api/ask")):
        pg.press("#ask_q", "Enter")
    pg.wait_for_selector(".answer")
    want = engine.ask(COLL, "When will the XJ-900 firmware ship?")
    assert want.citations and not want.abstained
    assert pg.inner_text(".answer") == want.answer
    for c in want.citations:
        href = pg.get_attribute(f".answer a.cite:text('[{c.n}]')", "href")
        assert href == f"#chunk-{c.n}"
        target = pg.query_selector(f"#chunk-{c.n}")
        assert (target.get_attribute("data-doc"), target.get_attribute("data-chunk")) == (c.doc_id, str(c.chunk))
        assert c.quote in [m.inner_text() for m in target.query_selector_all("mark")]
    pg.click(f".answer a.cite:text('[{want.citations[0].n}]')")
    assert pg.evaluate("location.hash") == f"#chunk-{want.citations[0].n}"
    page.shot("ask")
    assert page.errors == []


def test_an_ask_has_a_permalink_that_asks_again(browser: Any, base_url: str, page: Page, engine: Engine) -> None:
    pg = page.open()
    pg.fill("#filter_in", "year >= 2024")
    pg.click("#tab_ask")
    question = "When will the XJ-900 firmware ship?"
    pg.fill("#ask_q", question)
    pg.fill("#ask_chunks", "4")
    with pg.expect_response(lambda r: r.url.endswith("/api/ask")):
        pg.press("#ask_q", "Enter")
    pg.wait_for_selector(".answer")
    link = pg.get_attribute("#ask_permalink", "href")
    assert parse_qs(urlparse(link).query) == {
        "view": ["ask"],
        "collection": [COLL],
        "q": [question],
        "filter": ["year >= 2024"],
        "chunks": ["4"],
    }
    assert pg.evaluate("location.pathname + location.search") == link  # the address bar is the permalink
    want = engine.ask(COLL, question, filter="year >= 2024", chunks=4)
    other = Page(browser, base_url)
    try:
        pg2 = other.page
        with pg2.expect_response(lambda r: r.url.endswith("/api/ask")):
            pg2.goto(base_url + link)
        pg2.wait_for_selector(".answer")
        assert pg2.inner_text(".answer") == want.answer
        assert pg2.is_visible("#view_ask") and not pg2.is_visible("#view_search")
        assert pg2.input_value("#ask_q") == question and pg2.input_value("#ask_chunks") == "4"
        assert other.errors == []
    finally:
        other.close()
    assert page.errors == []


def test_a_permalink_to_a_mistyped_collection_names_it_and_searches_nothing(browser: Any, base_url: str) -> None:
    other = Page(browser, base_url)
    try:
        pg = other.page
        searched: list[str] = []
        pg.on("request", lambda r: searched.append(r.url) if "/api/search" in r.url else None)
        pg.goto(base_url + "/?collection=t_brwoser&q=harbour")
        pg.wait_for_function("document.querySelector('#search_err').textContent.length > 0")
        message = pg.inner_text("#search_err")
        assert message.startswith("NotFound: no collection named 't_brwoser'"), message
        assert pg.input_value("#q") == "harbour" and searched == []
        # The ask view says it where it is shown.
        pg.goto(base_url + "/?view=ask&collection=t_brwoser&q=who")
        pg.wait_for_function("document.querySelector('#ask_err').textContent.length > 0")
        assert pg.inner_text("#ask_err").startswith("NotFound: no collection named 't_brwoser'")
        assert pg.input_value("#ask_q") == "who"
    finally:
        other.close()


def test_eval_view_loads_a_report_worst_first(page: Page, engine: Engine, tmp_path: Path) -> None:
    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"id": "q1", "query": "XJ-900 firmware", "expected": ["n01"]},
                {"id": "q2", "query": "apples bread", "expected": ["n06"]},
                {"id": "q3", "query": "novel chapters", "expected": ["n02"]},
            ]
        )
        + "\n"
    )
    report = evaluate(engine, COLL, golden, ks=[1, 5], modes=["hybrid", "lexical"]).report
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report, default=str))
    pg = page.open()
    pg.click("#tab_eval")
    pg.set_input_files("#report_file", {"name": "other.json", "mimeType": "application/json", "buffer": b'{"a": 1}'})
    pg.wait_for_selector("#eval_err:not(:empty)")
    assert pg.inner_text("#eval_err") == (
        "other.json: this file is not a ranklock eval report (no modes, ks, per_query); "
        "load the report.json that `ranklock eval ... --out DIR` writes."
    )
    pg.set_input_files("#report_file", str(path))
    pg.wait_for_selector("#eval_metrics")
    assert pg.inner_text("#eval_err") == ""
    rows = pg.eval_on_selector_all(
        "#eval_metrics tbody tr", "rs => rs.map(r => [...r.children].map(c => c.textContent))"
    )
    assert rows == [
        [m, *(f"{report['modes'][m][c]:.4f}" for c in ["recall@1", "recall@5", "ndcg@1", "ndcg@5", "mrr"]), "3"]
        for m in ["hybrid", "lexical"]
    ]
    per = report["per_query"]["hybrid"]
    worst_first = sorted(per, key=lambda q: (per[q]["ndcg@1"], q))
    assert pg.eval_on_selector_all("#eval_queries tbody tr", "rs => rs.map(r => r.dataset.qid)") == worst_first
    link = pg.get_attribute(f"#eval_queries tr[data-qid='{worst_first[0]}'] a", "href")
    q = parse_qs(urlparse(link).query)
    assert q["q"] == [report["queries"][worst_first[0]]["text"]] and q["mode"] == ["hybrid"]
    page.shot("eval")
    with pg.expect_response(lambda r: r.url.endswith("/api/search")):
        pg.click(f"#eval_queries tr[data-qid='{worst_first[0]}'] a")
    pg.wait_for_selector("#hits li")
    assert pg.input_value("#q") == report["queries"][worst_first[0]]["text"]
    assert page.errors == []


def test_phone_width_has_no_horizontal_scroll(browser: Any, base_url: str) -> None:
    p = Page(browser, base_url, width=375)
    try:
        pg = p.open()
        search(pg, "harbour Halcyon firmware")
        assert pg.evaluate("document.documentElement.scrollWidth") <= 375
        p.shot("search-phone")
        assert p.errors == []
    finally:
        p.close()


def test_a_slow_answer_for_a_collection_no_longer_chosen_does_not_replace_the_chosen_ones(
    page: Page, engine: Engine
) -> None:
    # The first collection of the list loads when the page opens, and choosing another loads that: an
    # answer that comes back after the choice changed used to overwrite the fields (seen in CI).
    other = "t_browser_other"
    engine.create_collection(other, fields=["colour:keyword"], embedder=use_bow_embedder(engine))
    engine.ingest(other, [Document("o1", "", "a red kettle", {"colour": "red"})], replace=True)
    pg = page.open()
    held: list[Any] = []
    pg.route(f"**/api/collections/{other}", lambda route: held.append(route))  # answered when released below
    pg.select_option("#collection", other)
    deadline = time.monotonic() + 30
    while not held:
        assert time.monotonic() < deadline
        pg.wait_for_timeout(20)
    pg.select_option("#collection", COLL)
    pg.wait_for_selector("#fields button")
    with pg.expect_response(lambda r: r.url.endswith(f"/api/collections/{other}")):
        held[0].continue_()
    pg.wait_for_timeout(200)  # the stale answer has been handled by now
    fields = pg.eval_on_selector_all("#fields button", "bs => bs.map(b => b.textContent)")
    assert fields == ["lang keyword", "year int"]
    assert page.errors == []


def test_the_page_rounds_scores_as_the_cli_prints_them(page: Page) -> None:
    """Issue 41: the page showed a fused 1/64 as 0.01563 (toFixed breaks an exact tie upward), the CLI 0.01562."""
    pg = page.open()
    values = [1 / 64, 1 / 61 + 1 / 62, 1 / 60 + 1 / 60, 0.0078125, 0.123455, 0.016393442622950821, 1 / 61]
    shown = pg.evaluate("(xs) => xs.map((x) => fixed(x, 5))", values)
    assert shown == [f"{x:.5f}" for x in values]
    assert shown[0] == "0.01562"
