"""The review site in a real browser: Debian's Chromium (no browser download) driven by Playwright, against
``loopfsm review`` started as a user starts it.  Screenshots at 1,280 px go to ``LOOPFSM_SCREENSHOTS`` when set."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"  # Debian's package; no download
HASH = "sha256:" + "b" * 64


@contextmanager
def serving(*paths: str) -> Iterator[str]:
    """``loopfsm review PATHS`` started as a user starts it; the address it prints."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "loopfsm", "review", *paths],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, (line, proc.stderr.read() if proc.poll() is not None else "")
        yield found.group(0)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.errors = []  # type: ignore[attr-defined]
    page.on("console", lambda m: page.errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    yield page
    context.close()


def shot(page: Any, name: str) -> None:
    folder = os.environ.get("LOOPFSM_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / f"{name}.png"), full_page=True)


def submit(page: Any, feed: str, **values: str) -> None:
    form = page.locator(f'form[data-feed="{feed}"]')
    for name, value in values.items():
        field = form.locator(f'[name="{name}"]')
        if field.evaluate("e => e.tagName") == "SELECT":
            field.select_option(value)
        else:
            field.fill(value)
    form.locator("button[type=submit]").click()


def test_an_agent_loop_approval_path_clicked_through_in_chromium(site, page):
    page.goto(site)
    page.click("text=agent_loop")
    page.wait_for_selector("#sim-state >> text=planning")
    shot(page, "agent_loop")
    submit(page, "tool_proposed", tool="pay", arguments_hash=HASH, idempotent="false", now="1")
    page.wait_for_selector("#sim-state >> text=awaiting_tool")
    submit(page, "approval_required", approver="ann", expires_at="100", policy_reason="money", now="2")
    page.wait_for_selector("#sim-state >> text=awaiting_approval")
    assert page.locator("figure.diagram g.node.current title").text_content() == "awaiting_approval"
    submit(page, "approval_decided", outcome='"approve"', approver="ann", arguments_hash=HASH, now="3")
    page.wait_for_selector("#sim-state >> text=executing_tool")
    assert "approval_decided: awaiting_approval → executing_tool by approved" in page.text_content("#sim-status")
    assert page.locator("#sim-steps > li").count() == 3
    shot(page, "agent_loop_approved")
    page.click("#sim-back")
    page.wait_for_selector("#sim-state >> text=awaiting_approval")
    assert page.locator("#sim-steps > li").count() == 2
    assert page.errors == []


def test_a_wrong_argument_is_said_on_the_page_and_nothing_moves(site, page):
    page.goto(site + "machines/turnstile.html")
    page.wait_for_selector("#sim-state >> text=locked")
    page.fill("#policy-fare", "2")
    page.click("text=New run under this policy")
    page.wait_for_selector("#policy-fare[value='2']")
    submit(page, "coin")
    page.wait_for_selector("#sim-steps > li")
    assert page.text_content("#sim-state") == "locked"  # one coin of a fare of two
    submit(page, "coin")
    page.wait_for_selector("#sim-state >> text=unlocked")
    page.goto(site + "machines/agent_loop.html")
    page.click("text=New run")
    page.wait_for_selector("#sim-state >> text=planning")
    submit(page, "tool_proposed", tool="pay", arguments_hash=HASH, idempotent="false", now="soon")
    page.wait_for_selector("#sim-status .error")
    assert "argument 'now'" in page.text_content("#sim-status")
    assert page.text_content("#sim-state") == "planning"
    assert [e for e in page.errors if "422" not in e] == []  # the refused request is the console's only line


def test_a_state_and_an_arrow_show_their_branches_by_click_and_by_keyboard(site, page):
    page.goto(site + "machines/tool_breaker.html")
    page.wait_for_selector("#sim-state")
    page.locator("figure.diagram g.node", has=page.locator("title", has_text=re.compile("^HalfOpen$"))).click()
    details = page.text_content("#details")
    assert "HalfOpen" in details and "record/HalfOpen[0]" in details and "line " in details
    # Closed's three ways that move all reach Open: one arrow, from the box
    arrows = page.locator("figure.diagram g.edge", has=page.locator("title", has_text=re.compile("^Closed->Open$")))
    assert arrows.count() == 1
    arrows.first.focus()
    page.keyboard.press("Enter")
    assert page.text_content("#details h2") == "Closed → Open"
    assert "consecutive_failures_reach" in page.text_content("#details")
    # an arrow leaving the left end of its line is titled "HalfOpen:w->Open": still HalfOpen's
    back = page.locator("figure.diagram g.edge", has=page.locator("title", has_text=re.compile("^HalfOpen:w->Open$")))
    assert back.first.get_attribute("aria-label") == "arrow HalfOpen to Open"
    back.first.focus()
    page.keyboard.press("Enter")
    assert page.text_content("#details h2") == "HalfOpen \u2192 Open"
    page.click("#details a >> nth=0")
    assert re.search(r"/source/tool_breaker\.html#L\d+$", page.url)
    shot(page, "tool_breaker_source")
    assert page.errors == []


def test_a_states_branches_carry_the_numbers_its_card_gives_them(site, page):
    """The list numbered every branch of awaiting_approval 1 to 15 (refusals and the deadline among them), and
    "approved", 3 on the card, was 5 there.  A branch the card numbers carries that number, and no other does."""
    from loopfsm.core import loader
    from loopfsm.review_site.pages import table_json

    drawn = table_json(loader.load(ROOT / "machines" / "agent_loop.yaml"))["ways"]["awaiting_approval"]
    want = {w["branch"]: str(w["place"]) for w in drawn if w["place"] is not None}
    page.goto(site + "machines/agent_loop.html")
    page.wait_for_selector("#sim-state")
    page.locator("figure.diagram g.node", has=page.locator("title", has_text=re.compile("^awaiting_approval$"))).click()
    items = page.locator("#details ol.branches li")
    got = {}
    for i in range(items.count()):
        li = items.nth(i)
        place = li.locator(".place")
        got[li.locator("code").first.text_content()] = place.text_content() if place.count() else None
    assert {k: v for k, v in got.items() if v is not None} == want and len(want) >= 5
    assert any(v is None for v in got.values())  # a refusal has no number on the card, and none here
    assert page.errors == []


def test_an_arrow_lists_the_branches_it_is_drawn_for_and_no_other(site, page):
    """router_run's AwaitingApproval has two arrows, 3 to AwaitingTool and 4 to AwaitingEncrypt: each lists its
    own branch; the break note draws no arrow (its move goes back to Idle, whose arrows are not drawn), and the
    start arrow lists none (it listed every branch into Idle)."""
    page.goto(site + "machines/router_run.html")
    page.wait_for_selector("#sim-state")

    def chosen(arrow: Any) -> tuple[str, list[str]]:
        arrow.first.focus()  # as the keyboard does: an arrow's thin line is under the picture's background
        page.keyboard.press("Enter")
        return page.text_content("#details h2") or "", page.locator("#details ol.branches li code").all_text_contents()

    def clicked(selector: str) -> tuple[str, list[str]]:
        return chosen(page.locator(selector))

    assert clicked('figure.diagram g.edge[id="way:AwaitingApproval:w2"]') == (
        "AwaitingApproval \u2192 AwaitingTool",
        ["approval_decisions/AwaitingApproval[2]"],
    )
    fourth = clicked('figure.diagram g.edge[id="way:AwaitingApproval:w3"]')
    assert fourth == ("AwaitingApproval \u2192 AwaitingEncrypt", ["approval_decisions/AwaitingApproval[3]"])
    shot(page, "router_run_arrow")
    assert (
        page.locator("figure.diagram g.edge", has=page.locator("title", has_text=re.compile("^__shared"))).count() == 0
    )
    assert page.locator('figure.diagram g.edge[id="way:AwaitingApproval:w0"]').count() == 0  # into Idle: not drawn
    start = page.locator("figure.diagram g.edge", has=page.locator("title", has_text=re.compile("^__start__->")))
    assert chosen(start) == ("start \u2192 Idle", []) and "No branch." in (page.text_content("#details") or "")
    # a box's arrow: every way of the card into its target (tool_breaker's Closed -> Open)
    page.goto(site + "machines/tool_breaker.html")
    page.wait_for_selector("#sim-state")
    box = page.locator("figure.diagram g.edge", has=page.locator("title", has_text=re.compile("^Closed->Open$")))
    _, listed = chosen(box)
    assert len(listed) == 3 and all(n.startswith("record/Closed[") for n in listed)
    assert page.errors == []


def test_a_card_lines_target_follows_its_words_in_the_browsers_font(site, page):
    """Graphviz placed the italic target at an x measured in another font: Chromium showed a gap of about 40 px
    before it.  Joined as one text, the target starts where the words end (a space's width apart at most)."""
    page.goto(site + "machines/router_run.html")
    page.wait_for_selector("#sim-state")
    gaps = page.evaluate(
        """() => [...document.querySelectorAll("figure.diagram g.node text")].filter((t) => t.querySelector("tspan"))
          .map((t) => {
            const span = t.querySelector("tspan");
            const words = t.firstChild.textContent;
            const end = t.getStartPositionOfChar(0).x + t.getSubStringLength(0, words.length);
            return span.getStartPositionOfChar(0).x - end;
          })"""
    )
    assert len(gaps) >= 15 and max(abs(g) for g in gaps) < 1, gaps
    assert page.errors == []


def test_at_200_percent_zoom_the_page_reflows_without_a_sideways_scroll(site, browser):
    context = browser.new_context(viewport={"width": 640, "height": 900}, device_scale_factor=2)
    page = context.new_page()
    page.goto(site + "machines/router_run.html")
    page.wait_for_selector("#sim-state")
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    shot(page, "router_run_zoomed")
    context.close()
    assert overflow <= 0


def test_a_counterexample_of_a_planted_fault_is_stepped_to_its_violation(page, tmp_path):
    shipped = (ROOT / "machines" / "tool_breaker.yaml").read_text()
    scope = "      - guard: stale\n        states: [Closed, Disabled]\n"
    planted = tmp_path / "tool_breaker.yaml"
    planted.write_text(shipped.replace(scope, scope.replace("Closed, ", ""), 1))
    verify = [sys.executable, "-m", "loopfsm", "verify", str(planted), "--depth", "3", "--traces", str(tmp_path)]
    assert subprocess.run(verify, capture_output=True, cwd=ROOT).returncode == 1
    (trace,) = tmp_path.glob("*.trace.yaml")
    with serving(str(planted)) as url:
        page.goto(url + "machines/tool_breaker.html")
        page.wait_for_selector("#sim-state >> text=Closed")
        page.set_input_files("#sim-trace", str(trace))
        page.wait_for_selector("#sim-next")
        page.click("#sim-next")
        page.wait_for_selector("#sim-steps > li")
        assert "violates" not in page.text_content("#sim-status")
        page.click("#sim-next")
        page.wait_for_selector("#sim-steps .broken")
        assert "violates invariant stale_result_never_moves" in page.text_content("#sim-status")
        assert page.text_content("#sim-state") == "Open"
        assert page.locator("#sim-next").count() == 0
        shot(page, "counterexample")
    assert page.errors == []


def test_a_policy_change_on_the_picture(page, tmp_path):
    from tests.review_site.test_site import edited_breaker  # noqa: PLC0415

    new = edited_breaker(tmp_path)
    with serving("--diff", str(ROOT / "machines" / "tool_breaker.yaml"), str(new)) as url:
        page.goto(url)
        page.wait_for_selector("figure.diagram svg")
        # every arrow of the pair whose words changed (each way has its own arrow; the diff is by pair)
        changed = page.locator("figure.diagram g.edge.changed title")
        assert set(changed.all_text_contents()) == {"Open->HalfOpen"}
        assert "default 5 -> 3" in page.text_content(".right")
        assert "saved runs restore as they are" in page.text_content(".saved-runs")
        page.locator("figure.diagram g.edge.changed").first.focus()
        page.keyboard.press("Enter")
        assert page.text_content("#details h2") == "Open → HalfOpen"
        assert "an operator's nudge" in page.text_content("#details")
        shot(page, "diff")
    assert page.errors == []


def test_a_changed_arrow_that_arrives_at_a_chosen_side_is_marked(page, tmp_path):
    """The search may bring an arrow to its target's top (its title "Idle:e->AwaitingEncrypt:n"): the page read
    the target as "AwaitingEncrypt:n", so a diff did not mark that arrow changed, and its details said so."""
    text = (ROOT / "machines" / "router_run.yaml").read_text()
    new = tmp_path / "router_run.yaml"
    new.write_text(text.replace("description: execute, completed, encrypted (seal output)", "description: sealed on"))
    with serving("--diff", str(ROOT / "machines" / "router_run.yaml"), str(new)) as url:
        page.goto(url)
        page.wait_for_selector("figure.diagram svg")
        titles = page.locator("figure.diagram g.edge.changed title").all_text_contents()
        assert titles and all(t.split("->")[1].split(":")[0] == "AwaitingEncrypt" for t in titles), titles
        assert any(":" in t.split("->")[1] for t in titles), titles  # one arrives at a side the search chose
        page.locator("figure.diagram g.edge.changed").first.focus()
        page.keyboard.press("Enter")
        assert page.text_content("#details h2") == "Idle \u2192 AwaitingEncrypt"
    assert page.errors == []


@pytest.mark.parametrize("name", sorted(p.stem for p in (ROOT / "machines").glob("*.yaml")))
def test_every_machines_page_loads_clean_and_offers_its_initial_feeds(site, page, name):
    page.goto(site + f"machines/{name}.html")
    page.wait_for_selector("#sim-state")
    assert page.locator("figure.diagram svg").count() == 1
    assert page.locator("form.feed[data-feed]").count() >= 1  # the feeds the initial state takes
    state = page.text_content("#sim-state")
    current = page.locator("figure.diagram g.node.current title").all_text_contents()
    assert current == [state]
    assert page.errors == []


def test_a_router_sessions_own_run_is_stepped_through_on_its_diagram(page, tmp_path):
    """A session served by the router on SQLite, read back with ``loopfsm store trace``, stepped to its end."""
    from tests.support.router_support import TOOLS_SCRIPT, client, make  # noqa: PLC0415

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert subprocess.run([sys.executable, "-m", "loopfsm", "store", "init", url], capture_output=True).returncode == 0
    router, tc = make(url, "loopfsm_", TOOLS_SCRIPT)
    assert client(tc, "s1", tmp_path).run("tidy up")["status"] == "completed"
    router.close()
    trace = tmp_path / "s1.trace.yaml"
    written = subprocess.run(
        [sys.executable, "-m", "loopfsm", "store", "trace", url, "s1", "-o", str(trace)], capture_output=True
    )
    assert written.returncode == 0, written.stderr
    with serving(str(ROOT / "machines" / "router_run.yaml")) as site_url:
        page.goto(site_url + "machines/router_run.html")
        page.wait_for_selector("#sim-state >> text=Idle")
        page.set_input_files("#sim-trace", str(trace))
        page.wait_for_selector("#sim-next")
        states = []
        while page.locator("#sim-next").count():
            count = page.locator("#sim-steps > li").count()
            page.click("#sim-next")
            page.wait_for_function(f"document.querySelectorAll('#sim-steps > li').length > {count}")
            states.append(page.text_content("#sim-state"))
        assert states == ["AwaitingTool", "AwaitingTool", "Idle"]
        assert page.locator("#sim-steps .broken").count() == 0
        shot(page, "router-trace")
    assert page.errors == []


def test_a_changed_decision_rule_is_marked_on_the_diff_pages_picture(page, tmp_path):
    from tests.review_site.test_site import SEALING  # noqa: PLC0415

    shipped = (ROOT / "machines" / "router_run.yaml").read_text()
    assert SEALING in shipped
    new = tmp_path / "router_run.yaml"
    new.write_text(shipped.replace(SEALING, SEALING.replace("value: not_allowed", "value: busy"), 1))
    with serving("--diff", str(ROOT / "machines" / "router_run.yaml"), str(new)) as url:
        page.goto(url)
        page.wait_for_selector("figure.diagram svg")
        marked = page.locator("figure.diagram g.node.decided title")
        assert marked.all_text_contents() == ["AwaitingEncrypt"]
        assert page.locator("figure.diagram g.node.decided").first.is_visible()
        assert "admit: 1 rule changed" in page.text_content("figure.diagram")
        assert "answer(value=not_allowed) -> answer(value=busy)" in page.text_content("ul.decisions")
        shot(page, "diff-decision")
    assert page.errors == []
