"""The review site over real HTTP requests (Starlette's test client): pages, the simulator on the compiled
machine, the run as files ``replay`` accepts, sessions kept apart, and bad input refused with a 4xx."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from starlette.testclient import TestClient

from loopfsm import compile_spec, load
from loopfsm.cli.main import main
from loopfsm.core.registries import registry_named
from loopfsm.review_site.app import MAX_JSON_BYTES, create_app, write_static
from loopfsm.review_site.pages import SiteMachine, table_json

ROOT = Path(__file__).resolve().parents[2]
HASH = "sha256:" + "a" * 64


def site_client(app: Any) -> TestClient:
    """A browser's view of the site: it asks for 127.0.0.1 and sends JSON, as the page's script does."""
    return TestClient(app, base_url="http://127.0.0.1", headers={"content-type": "application/json"})


def site_machine(name: str) -> SiteMachine:
    path = ROOT / "machines" / f"{name}.yaml"
    spec = load(path)
    return SiteMachine(path, compile_spec(spec, registry_named(spec.registry)))


@pytest.fixture(scope="module")
def machines() -> list[SiteMachine]:
    return [site_machine("agent_loop"), site_machine("turnstile")]


@pytest.fixture
def client(machines: list[SiteMachine]) -> TestClient:
    return site_client(create_app(machines))


def feed(client: TestClient, name: str, feed: str, **args: Any) -> dict[str, Any]:
    response = client.post(f"/api/{name}/feed", json={"feed": feed, "args": args})
    assert response.status_code == 200, response.text
    outcome: dict[str, Any] = response.json()["outcome"]
    return outcome


def approval_path(client: TestClient) -> None:
    feed(client, "agent_loop", "tool_proposed", tool="pay", arguments_hash=HASH, idempotent=False, now=1)
    feed(client, "agent_loop", "approval_required", approver="ann", expires_at=100, policy_reason="money", now=2)
    feed(client, "agent_loop", "approval_decided", outcome="approve", approver="ann", arguments_hash=HASH, now=3)


def test_the_index_links_every_machine_and_each_page_has_its_diagram_and_sheet(client):
    index = client.get("/").text
    assert 'href="machines/agent_loop.html"' in index and 'href="machines/turnstile.html"' in index
    page = client.get("/machines/agent_loop.html").text
    assert "<svg" in page and "decided also by the machine&#39;s own data" in page  # the diagram with its legend
    for section in ("Design review", "Policy", "Traced", "Invariants"):
        assert f"<h2>{section}" in page, section
    assert 'id="simulator"' in page and "https://" not in page.split("<svg", 1)[0]  # no CDN, no network


def test_each_branch_the_page_shows_names_its_yaml_line(machines):
    agent_loop = machines[0]
    table = table_json(agent_loop.spec)
    lines = agent_loop.path.read_text().splitlines()
    for branches in table["branches"].values():
        for b in branches:
            at = lines[b["line"] - 1].strip()
            assert at.startswith("- "), (b["name"], b["line"], at)
    # dispatch's `first: [*deadline]` links to where the alias's branch is written, as check's errors do
    shared = {b["line"] for b in table["branches"]["recovering"] if b["feed"] == "dispatch" and b["name"] == "deadline"}
    assert [lines[n - 1].strip() for n in shared] == ["- &deadline"]


def test_an_approval_path_through_the_simulator_is_the_compiled_machines(client):
    assert client.get("/api/agent_loop/state").json()["state"] == "planning"
    approval_path(client)
    done = feed(client, "agent_loop", "tool_succeeded", now=4)
    assert (done["from"], done["to"], done["branch"]) == ("executing_tool", "observing_result", "result_in")
    assert done["asked"] == [
        {"branch": "deadline", "held": False, "guards": [{"guard": "deadline_passed", "held": False}]},
        {"branch": "result_in", "held": True, "guards": []},
    ]
    assert done["record"]["attributes"]["gen_ai.tool.name"] == "pay"
    view = client.get("/api/agent_loop/state").json()
    assert view["state"] == "observing_result" and view["data"]["tool"] == "pay"
    assert [s["to"] for s in view["steps"]] == [
        "awaiting_tool",
        "awaiting_approval",
        "executing_tool",
        "observing_result",
    ]
    offered = {f["name"] for f in view["feeds"] if f["allowed"]}
    assert "result_accepted" in offered and "dispatch" not in offered


def test_a_refused_feed_shows_the_apis_error_and_changes_nothing(client):
    approval_path(client)
    before = client.get("/api/agent_loop/snapshot.json").json()
    refused = feed(
        client, "agent_loop", "approval_decided", outcome="approve", approver="ann", arguments_hash=HASH, now=4
    )
    assert refused["branch"] is None and refused["error"].startswith("IllegalFeed")
    assert client.get("/api/agent_loop/snapshot.json").json() == before


def test_step_back_restores_the_run_before_the_last_feed(client):
    approval_path(client)
    client.post("/api/agent_loop/back")
    view = client.get("/api/agent_loop/state").json()
    assert view["state"] == "awaiting_approval" and len(view["steps"]) == 2
    assert client.post("/api/turnstile/back").status_code == 400  # nothing to undo there


def test_the_downloaded_trace_replays_and_the_snapshot_restores(client, tmp_path, capsys):
    approval_path(client)
    feed(client, "agent_loop", "approval_decided", outcome="deny", approver="ann", arguments_hash=HASH, now=4)
    trace = client.get("/api/agent_loop/trace.yaml")
    assert trace.headers["content-disposition"] == 'attachment; filename="agent_loop.trace.yaml"'
    (tmp_path / "run.trace.yaml").write_text(trace.text)
    path = ROOT / "machines" / "agent_loop.yaml"
    assert main(["replay", str(path), str(tmp_path / "run.trace.yaml")]) == 0
    assert "refused" in capsys.readouterr().out  # the refused decision is in the trace, and refused again
    snap = client.get("/api/agent_loop/snapshot.json").json()
    restored = site_machine("agent_loop").compiled.restore(snap)
    assert restored.state == "executing_tool" and restored.snapshot() == snap


def test_a_run_starts_from_an_uploaded_snapshot_or_a_played_trace(client):
    approval_path(client)
    snap = client.get("/api/agent_loop/snapshot.json").json()
    trace = client.get("/api/agent_loop/trace.yaml").text
    client.post("/api/agent_loop/new", json={})
    assert client.get("/api/agent_loop/state").json()["state"] == "planning"
    assert client.post("/api/agent_loop/new", json={"snapshot": snap}).json()["state"] == "executing_tool"
    loaded = client.post(
        "/api/agent_loop/trace", content=trace.encode(), headers={"content-type": "application/yaml"}
    ).json()
    assert loaded["state"] == "planning" and loaded["pending_count"] == 3 and loaded["steps"] == []
    assert loaded["pending"] == [{"feed": "tool_proposed"}]  # the next one is named
    for _ in range(3):
        assert client.post("/api/agent_loop/next").status_code == 200
    played = client.get("/api/agent_loop/state").json()
    assert played["state"] == "executing_tool" and len(played["steps"]) == 3 and played["pending"] == []
    assert client.post("/api/agent_loop/next").status_code == 400  # nothing left to feed


def test_a_counterexample_of_a_planted_fault_steps_to_its_violation(tmp_path, capsys):
    """The tool breaker with Closed's stale check taken out: verify's counterexample, stepped on the page."""
    shipped = (ROOT / "machines" / "tool_breaker.yaml").read_text()
    scope = "      - guard: stale\n        states: [Closed, Disabled]\n"
    assert scope in shipped
    (tmp_path / "tool_breaker.yaml").write_text(shipped.replace(scope, scope.replace("Closed, ", ""), 1))
    assert main(["verify", str(tmp_path / "tool_breaker.yaml"), "--depth", "3", "--traces", str(tmp_path)]) == 1
    capsys.readouterr()
    (trace,) = tmp_path.glob("*.trace.yaml")
    spec = load(tmp_path / "tool_breaker.yaml")
    planted = SiteMachine(tmp_path / "tool_breaker.yaml", compile_spec(spec, registry_named(spec.registry)))
    client = site_client(create_app([planted]))
    view = client.post("/api/tool_breaker/trace", content=trace.read_bytes()).json()
    broken = []
    while view["pending"]:
        body = client.post("/api/tool_breaker/next").json()
        view, broken = body["view"], broken + [body["outcome"]["broken"]]
    assert broken[:-1] == [[]] * (len(broken) - 1)  # nothing breaks before the last step
    assert broken[-1] == ["stale_result_never_moves: does not hold after record, Closed to Open"]


def test_sessions_share_nothing(machines):
    one, two = site_client(create_app(machines)), None
    app = one.app
    two = site_client(app)
    feed(one, "turnstile", "coin")
    assert one.get("/api/turnstile/state").json()["state"] == "unlocked"
    assert two.get("/api/turnstile/state").json()["state"] == "locked"
    assert one.cookies.get("loopfsm_review") != two.cookies.get("loopfsm_review")


def test_a_policy_given_for_a_run_is_the_one_it_feeds_under(client):
    view = client.post("/api/turnstile/new", json={"policy": {"fare": 2}}).json()
    assert view["policy"] == {"fare": 2}
    assert feed(client, "turnstile", "coin")["to"] == "locked"
    assert feed(client, "turnstile", "coin")["to"] == "unlocked"
    first = client.post("/api/turnstile/new", json={"policy": {"fare": 2}}).json()
    asked = feed(client, "turnstile", "coin")["asked"]
    assert first["state"] == "locked" and asked == [
        {  # one coin of a fare of two: the run's policy, not the YAML's default
            "branch": "coin/locked[0]",
            "held": False,
            "guards": [{"guard": "fare_paid(fare=2 (policy.fare))", "held": False}],
        },
        {"branch": "coin/locked[1]", "held": True, "guards": []},
    ]
    refused = client.post("/api/turnstile/new", json={"policy": {"fare": 0}})
    assert refused.status_code == 400 and "fare" in refused.json()["error"]


@pytest.mark.parametrize(
    ("method", "url", "body", "status", "words"),
    [
        ("post", "/api/agent_loop/feed", b"{not json", 400, "not JSON"),
        ("post", "/api/agent_loop/feed", b'{"feed": 3}', 400, "expected {feed"),
        ("post", "/api/agent_loop/feed", b'{"feed": "warp", "args": {}}', 400, "no feed"),
        ("post", "/api/agent_loop/feed", b'{"feed": "tool_proposed", "args": {"tool": 5}}', 422, "argument"),
        ("post", "/api/agent_loop/feed", b'{"feed": "tool_proposed", "args": [1]}', 400, "args must map"),
        ("post", "/api/agent_loop/new", b'{"snapshot": {"machine": "agent_loop"}}', 400, "snapshot"),
        ("post", "/api/agent_loop/new", b'{"snapshot": [1]}', 400, "JSON object"),
        ("post", "/api/agent_loop/trace", b"steps: [", 400, "not a trace file"),
        ("post", "/api/agent_loop/trace", b"machine: turnstile\nsteps: []\n", 400, "not agent_loop"),
        ("post", "/api/agent_loop/trace", b"a: &x [1]\nb: *x\n", 400, "aliases"),
        ("get", "/api/nope/state", None, 404, "no such machine"),
        ("get", "/machines/nope.html", None, 404, "no such machine"),
        ("get", "/assets/pyproject.toml", None, 404, "no such file"),
        ("get", "/assets/..%2F..%2Fpyproject.toml", None, 404, "no such page"),
        ("get", "/source/..%2F..%2Fetc%2Fpasswd", None, 404, "no such page"),
    ],
)
def test_bad_input_gets_a_message_and_a_4xx_never_a_traceback(client, method, url, body, status, words):
    response = getattr(client, method)(url, content=body) if body is not None else getattr(client, method)(url)
    assert response.status_code == status, response.text
    assert words in response.json()["error"] and "Traceback" not in response.text


def test_a_huge_upload_is_refused_before_it_is_read_whole(client):
    response = client.post("/api/agent_loop/feed", content=b"[" * (MAX_JSON_BYTES + 1))
    assert response.status_code == 413 and "larger than" in response.json()["error"]


def test_static_pages_have_no_simulator_and_need_no_server(machines, tmp_path):
    written = write_static(machines, tmp_path)
    assert {p.relative_to(tmp_path).as_posix() for p in written} >= {
        "index.html",
        "machines/agent_loop.html",
        "source/agent_loop.html",
        "assets/review.js",
    }
    page = (tmp_path / "machines" / "agent_loop.html").read_text()
    assert 'data-mode="static"' in page and 'id="simulator"' not in page and "<svg" in page
    source = (tmp_path / "source" / "agent_loop.html").read_text()
    assert 'id="L208"' in source


def test_the_command_writes_static_pages_and_refuses_a_bad_start(tmp_path, capsys):
    path = str(ROOT / "machines" / "turnstile.yaml")
    assert main(["review", path, "--static", str(tmp_path / "site")]) == 0
    assert re.search(r"wrote \d+ files", capsys.readouterr().out)
    (tmp_path / "bad.json").write_text(json.dumps({"machine": "turnstile", "state": "flying"}))
    assert main(["review", path, "--from", str(tmp_path / "bad.json")]) == 2
    assert "--from" in capsys.readouterr().err
    assert main(["review", path, "--from", str(tmp_path / "missing.json")]) == 2


def test_a_script_in_a_description_stays_text(tmp_path):
    text = (ROOT / "machines" / "turnstile.yaml").read_text()
    hostile = text.replace(
        "description: The arm is locked", "description: </script><script>alert(1)</script> locked", 1
    )
    assert hostile != text
    (tmp_path / "turnstile.yaml").write_text(hostile)
    spec = load(tmp_path / "turnstile.yaml")
    m = SiteMachine(tmp_path / "turnstile.yaml", compile_spec(spec, registry_named(spec.registry)))
    page = site_client(create_app([m])).get("/machines/turnstile.html").text
    assert "<script>alert(1)" not in page
    assert yaml.safe_load(hostile)["machine"] == "turnstile"


NUDGE = """  nudge:
    description: An operator lets a probe through now.
    args:
      now: {type: integer, description: time in ms}
    from:
      Open:
        - to: HalfOpen
          actions: [enter_half_open]
          description: an operator's nudge
  reset:
"""


def edited_breaker(tmp_path: Path) -> Path:
    """The tool breaker with trip_after 5 -> 3, an arrow reworded and a feed added: a policy change under review."""
    text = (ROOT / "machines" / "tool_breaker.yaml").read_text()
    text = text.replace(
        "  trip_after:\n    type: integer\n    default: 5", "  trip_after:\n    type: integer\n    default: 3", 1
    )
    text = text.replace("  reset:\n", NUDGE, 1)
    (tmp_path / "new.yaml").write_text(text)
    return tmp_path / "new.yaml"


def test_the_diff_page_marks_the_new_arrows_and_says_what_loopfsm_diff_says(tmp_path, capsys):
    old, new = ROOT / "machines" / "tool_breaker.yaml", edited_breaker(tmp_path)
    assert main(["diff", str(old), str(new)]) == 1
    said = capsys.readouterr().out.splitlines()[1:]
    assert main(["review", "--diff", str(old), str(new), "--static", str(tmp_path / "site")]) == 0
    page = (tmp_path / "site" / "index.html").read_text()
    for line in said[1:-1]:  # each change, in loopfsm diff's words
        assert html.escape(line.strip()[2:]) in page, line
    assert "saved runs restore as they are" in page and said[-1].strip() == "saved runs restore as they are"
    assert "<li>policy trip_after (read by record from Closed): default 5 -&gt; 3</li>" in page
    arrows = json.loads(page.split('<script type="application/json" id="diff">', 1)[1].split("</script>", 1)[0])
    assert arrows == {"added": [], "changed": [["Open", "HalfOpen"]], "removed": []}


def test_the_diff_takes_git_revisions(tmp_path, capsys):
    at = "HEAD:machines/turnstile.yaml"
    assert main(["review", "--diff", at, str(ROOT / "machines" / "turnstile.yaml"), "--static", str(tmp_path)]) == 0
    assert "turnstile: HEAD:machines/turnstile.yaml" in (tmp_path / "index.html").read_text()
    assert main(["review", "--diff", "NOPE:machines/turnstile.yaml", "x.yaml", "--static", str(tmp_path)]) == 2
    assert "git has no such REV:PATH" in capsys.readouterr().err


def test_without_graphviz_the_page_says_the_drawing_is_missing_and_shows_the_rest(machines, tmp_path, monkeypatch):
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no `dot` on it, as on a machine without Graphviz
    page = site_client(create_app(machines)).get("/machines/turnstile.html")
    assert page.status_code == 200
    text = page.text
    assert "<svg" not in text and "needs Graphviz" in text
    assert "the order a state tries a feed" in text  # the legend, in words
    assert "<h2>Policy" in text and '<script type="application/json" id="table">' in text


def test_what_runs_keep_is_bounded_per_run_and_across_sessions(machines, monkeypatch):
    from loopfsm.review_site import app, simulator

    monkeypatch.setattr(simulator, "MAX_RUN_BYTES", 3000)
    client = site_client(create_app(machines))
    for _ in range(3):
        feed(client, "turnstile", "coin")
    refused = None
    for _ in range(40):
        refused = client.post("/api/turnstile/feed", json={"feed": "push", "args": {}})
        if refused.status_code != 200:
            break
    assert refused is not None and refused.status_code == 413 and "MiB of snapshots" in refused.json()["error"]
    monkeypatch.setattr(simulator, "MAX_RUN_BYTES", 10**9)
    monkeypatch.setattr(app, "MAX_SITE_BYTES", 4000)
    site_app = create_app(machines)
    first, second = site_client(site_app), site_client(site_app)
    for _ in range(8):
        feed(first, "turnstile", "coin")
    for _ in range(8):
        feed(second, "turnstile", "coin")  # together past the budget: the first session is dropped
    assert first.get("/api/turnstile/state").json()["steps"] == []  # a new run: its session was dropped
    assert len(second.get("/api/turnstile/state").json()["steps"]) == 8


# -- found by using it as an attacker would ------------------------------------------------------------------


def test_a_page_of_another_site_is_refused_by_host_by_origin_and_by_content_type(machines):
    app = create_app(machines)
    rebound = TestClient(app, base_url="http://attacker.example")  # DNS rebinding: another name, our address
    assert rebound.get("/api/turnstile/state").status_code == 400
    ours = TestClient(app, base_url="http://127.0.0.1")
    other = ours.post("/api/turnstile/feed", json={"feed": "coin"}, headers={"origin": "http://attacker.example"})
    assert other.status_code == 403 and "another site" in other.json()["error"]
    plain = ours.post("/api/turnstile/feed", content=b'{"feed": "coin"}', headers={"content-type": "text/plain"})
    assert plain.status_code == 415
    assert ours.get("/api/turnstile/state").json()["steps"] == []  # none of them fed anything
    same = ours.post("/api/turnstile/feed", json={"feed": "coin"}, headers={"origin": "http://127.0.0.1:8000"})
    assert same.status_code == 200


def test_what_json_cannot_carry_is_refused_before_it_reaches_a_run(client):
    surrogate = b'{"feed": "hand_off", "args": {"owner": "\\ud800", "now": 1}}'
    refused = client.post("/api/agent_loop/feed", content=surrogate)
    assert refused.status_code == 400 and "surrogate" in refused.json()["error"]
    nan = client.post("/api/turnstile/new", content=b'{"policy": {"fare": NaN}}')
    assert nan.status_code == 400 and "NaN" in nan.json()["error"] or "nan" in nan.json()["error"]
    assert client.get("/api/agent_loop/state").status_code == 200  # the run is as it was


@pytest.mark.parametrize(
    "value",
    ["2001-01-01", ".nan", ".inf", "!!binary aGVsbG8=", "!!set {a}", "2001-01-01T00:00:00Z"],
)
def test_a_trace_holding_what_json_cannot_carry_is_refused_whole(client, value):
    text = f"machine: turnstile\nsteps: [{{feed: coin, args: {{}}}}, {{feed: push, args: {{x: {value}}}}}]\n"
    refused = client.post("/api/turnstile/trace", content=text.encode(), headers={"content-type": "application/yaml"})
    assert refused.status_code == 400 and "JSON cannot carry" in refused.json()["error"]
    view = client.get("/api/turnstile/state").json()
    assert view["pending_count"] == 0 and view["steps"] == []


def test_a_trace_step_the_machine_cannot_be_fed_is_refused_at_load_not_at_its_turn(client):
    text = "machine: agent_loop\nsteps:\n- {feed: tick, args: {now: 1}}\n- {feed: warp, args: {}}\n"
    refused = client.post("/api/agent_loop/trace", content=text.encode(), headers={"content-type": "application/yaml"})
    assert refused.status_code == 400 and "step 2 feeds 'warp'" in refused.json()["error"]


def test_a_long_run_is_shown_by_its_latest_steps(client, monkeypatch):
    from loopfsm.review_site import simulator

    monkeypatch.setattr(simulator, "SHOWN_STEPS", 5)
    for _ in range(7):
        feed(client, "turnstile", "push")
    view = client.get("/api/turnstile/state").json()
    assert len(view["steps"]) == 5 and view["earlier"] == 2
    assert client.get("/api/turnstile/trace.yaml").text.count("feed: push") == 7  # the trace has every step


def test_the_command_refuses_what_would_end_in_a_traceback_or_a_stray_file(tmp_path, capsys):
    turnstile = str(ROOT / "machines" / "turnstile.yaml")
    (tmp_path / "a-file").write_text("x")
    stray = tmp_path / "git wrote this"
    cases = [
        (["review", turnstile, "--static", str(tmp_path / "a-file")], "cannot write there"),
        (["review", turnstile, "--static", str(tmp_path / "a-file" / "sub")], "cannot write there"),
        (["review", turnstile, "--port", "70000"], "a port is 0"),
        (["review", "--diff", f"--output={stray}", turnstile, "--static", str(tmp_path / "d")], "not an option"),
        (["review", "--diff", "HEAD:machines/..", turnstile, "--static", str(tmp_path / "d")], "--diff"),
        (["review", turnstile, turnstile], "two machine files hold machine 'turnstile'"),
        (["review", turnstile, "--diff", turnstile, turnstile], "takes no other paths"),
    ]
    for argv, words in cases:
        assert main(argv) == 2, argv
        assert words in capsys.readouterr().err, argv
    assert not stray.exists()


def test_a_removed_arrow_is_drawn_red_and_dotted_on_the_new_picture(tmp_path):
    from loopfsm.rendering.diff import diff_specs, load_for_diff
    from loopfsm.review_site.pages import diff_page

    old = ROOT / "machines" / "turnstile.yaml"
    text = old.read_text()
    gone = (
        "        - to: locked\n          actions: [count_passage]\n"
        "          description: one person passes, it re-locks\n"
    )
    new_text = text.replace(gone, "        - stay: true\n          description: jammed\n")
    assert new_text != text
    (tmp_path / "new.yaml").write_text(new_text)
    page = diff_page(diff_specs(load_for_diff(str(old)), load_for_diff(str(tmp_path / "new.yaml"))), "old", "new")
    arrows = json.loads(page.split('id="diff">', 1)[1].split("</script>", 1)[0])
    assert arrows["removed"] == [["unlocked", "locked"]]
    assert 'stroke="#b91c1c"' in page and "removed: push" in page


def test_each_guard_of_a_branch_is_shown_with_its_answer_up_to_the_first_that_fails():
    """The tool breaker's record in Closed: conditions and guards asked in order, as the machine asks them."""
    client = site_client(create_app([site_machine("tool_breaker")]))
    feed(client, "tool_breaker", "acquire", now=0, call_id="a")
    asked = feed(client, "tool_breaker", "record", now=0, call_id="a", outcome="failure", generation=0)["asked"]
    assert [a["branch"] for a in asked] == [f"record/Closed[{i}]" for i in range(7)]
    assert asked[0]["guards"] == [{"guard": "stale", "held": False}]
    assert asked[3]["guards"] == [
        {"guard": "consecutive_failures_reach(threshold=5 (policy.trip_after))", "held": False}
    ]
    assert asked[-1] == {"branch": "record/Closed[6]", "held": True, "guards": []}


def test_a_trace_upload_over_its_limit_is_refused_unread_and_sessions_past_the_limit_drop_the_oldest(
    machines, monkeypatch
):
    from loopfsm.review_site import app

    client = site_client(create_app(machines))
    big = b"machine: turnstile\nsteps: []\n#" + b"x" * app.MAX_TRACE_UPLOAD
    refused = client.post("/api/turnstile/trace", content=big, headers={"content-type": "application/yaml"})
    assert refused.status_code == 413 and "larger than 2048 KiB" in refused.json()["error"]
    monkeypatch.setattr(app, "MAX_SESSIONS", 2)
    shared = create_app(machines)
    first, second, third = (site_client(shared) for _ in range(3))
    feed(first, "turnstile", "coin")
    feed(second, "turnstile", "coin")
    feed(third, "turnstile", "coin")  # a third session: the one used longest ago goes
    assert first.get("/api/turnstile/state").json()["steps"] == []
    assert len(third.get("/api/turnstile/state").json()["steps"]) == 1


def test_the_limits_docs_review_md_names_are_the_sites():
    from tests.support.docs_pages import page

    from loopfsm.review_site import app, simulator
    from loopfsm.verification import tracefile

    text = " ".join(page("docs/review.md").split())
    said = {
        f"the {app.MAX_SESSIONS} sessions used last": True,
        f"a run up to {simulator.MAX_STEPS:,} steps": True,
        f"{simulator.MAX_RUN_BYTES // 2**20} MiB of the snapshots": True,
        f"every run together {app.MAX_SITE_BYTES // 2**20} MiB": True,
        f"({app.MAX_JSON_BYTES // 2**20} MiB of JSON, {app.MAX_TRACE_UPLOAD // 2**20} MiB of trace)": True,
        f"nested more than {tracefile.MAX_TRACE_DEPTH} deep": True,
        f"shown by the latest {simulator.SHOWN_STEPS}": True,
    }
    assert {claim: claim in text for claim in said} == said
    assert tracefile.MAX_TRACE_EVENTS == 1_000_000 and "more than a million YAML values" in text


# -- changed decision rules on a diff page's picture --------------------------------------------------------------
SEALING = (
    "      - name: no_inject_while_sealing\n"
    '        description: "no inject while an encrypted completion waits for its seal"\n'
    "        states: [AwaitingEncrypt]\n"
    "        when: {request: inject}\n"
    "        result: {name: answer, params: {value: not_allowed}}\n"
)
PREEMPTS = (
    "      - name: escape_preempts\n"
    '        description: "break or inject while a turn runs: preempt it at once"\n'
    "        when: {request: [break, inject], lock: [held, expired]}\n"
    "        result: {name: answer, params: {value: preempt}}\n"
)
IDLE_BREAK = (
    "      - name: break_when_idle\n"
    '        description: "break with nothing to stop: answered idle, changes nothing"\n'
    "        states: [Idle]\n"
    "        when: {request: break}\n"
    "        result: {name: answer, params: {value: idle}}\n"
)
TOOLS_CLOSED = (
    "      - name: tools_closed\n"
    "        states: [AwaitingTool]\n"
    "        when: {request: tool_results}\n"
    "        result: {name: answer, params: {value: busy}}\n"
)
DECRYPT_ANSWER = (
    "      - name: decrypt_answer\n"
    '        description: "the decrypted history the pause waits for"\n'
    "        states: [AwaitingDecrypt]\n"
    "        when: {request: decrypted}\n"
    "        result: {name: answer, params: {value: admit}}\n"
)
APPROVAL_ANSWER = (
    "      - name: approval_answer\n"
    '        description: "the approval decisions the pause waits for"\n'
    "        states: [AwaitingApproval]\n"
    "        when: {request: approval_decisions}\n"
    "        result: {name: answer, params: {value: admit}}\n"
)
AWAITING = ["AwaitingDecrypt", "AwaitingApproval", "AwaitingTool", "AwaitingEncrypt"]


def decision_diff_page(tmp_path: Path, name: str, *edits: tuple[str, str]) -> str:
    """The diff page of machines/NAME.yaml against a copy with ``edits`` made, served as ``review --diff`` serves it."""
    from loopfsm.rendering.diff import diff_specs, load_for_diff
    from loopfsm.review_site.pages import diff_page

    old = ROOT / "machines" / f"{name}.yaml"
    text = old.read_text()
    for before, after in edits:
        assert text.count(before) == 1, before
        text = text.replace(before, after)
    (tmp_path / "new.yaml").write_text(text)
    page = diff_page(diff_specs(load_for_diff(str(old)), load_for_diff(str(tmp_path / "new.yaml"))), "old", "new")
    response = site_client(create_app([], diff=page)).get("/")
    assert response.status_code == 200
    return response.text


def decided_states(page: str) -> dict[str, str]:
    """The states the page's picture outlines for changed decision rules, each with the words drawn beside it."""
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    found = {}
    for m in re.finditer(r'<g id="node\d+" class="node decided">\s*<title>([^<]*)</title>(.*?)(?=<!--|$)', svg, re.S):
        words = re.findall(r'<text [^>]*fill="#c2410c">([^<]*)</text>', m.group(2))
        found[html.unescape(m.group(1))] = html.unescape(" / ".join(words))
    assert svg.count('class="node decided"') == len(found)  # none missed
    return found


def decided_list(page: str) -> str:
    """The text of the page's "Decision rules changed" list."""
    part = page.split("<h2>Decision rules changed</h2>", 1)[1].split("</ul></li></ul>", 1)[0]
    return html.unescape(re.sub(r"<[^>]+>", " ", part))


@pytest.mark.parametrize(
    ("edits", "marked", "words"),
    [
        pytest.param(
            [(SEALING, SEALING.replace("not_allowed", "busy"))],
            {"AwaitingEncrypt": "admit: 1 rule changed"},
            "rule no_inject_while_sealing: answer answer(value=not_allowed) -> answer(value=busy)",
            id="an answer",
        ),
        pytest.param(
            [(IDLE_BREAK, IDLE_BREAK.replace("{request: break}", "{request: [break, inject]}"))],
            # Idle is drawn again where each arrow back to it ends: the copies are outlined, the words said once
            {"Idle": "admit: 1 rule changed"},
            "rule break_when_idle: when request=break -> request in [break, inject]",
            id="a when",
        ),
        pytest.param(
            [(SEALING + PREEMPTS, PREEMPTS + SEALING)],
            {"AwaitingEncrypt": "admit: 2 rules changed"},
            "rule order replay, reused_request_id, no_inject_while_sealing, escape_preempts",
            id="two rules swapped",
        ),
        pytest.param(
            [("    rules:\n      - name: replay\n", "    rules:\n" + TOOLS_CLOSED + "      - name: replay\n")],
            {"AwaitingTool": "admit: 1 rule changed"},
            "rule tools_closed added, tried 1st here: request=tool_results => answer(value=busy)",
            id="a rule added",
        ),
        pytest.param(
            [(IDLE_BREAK, "")],
            {"Idle": "admit: 1 rule changed"},
            "rule break_when_idle removed: request=break => answer(value=idle)",
            id="a rule removed",
        ),
        pytest.param(
            [
                (
                    "  pause_ttl_ms:\n    type: integer\n    default: 86400000",
                    "  pause_ttl_ms:\n    type: integer\n    default: 3600000",
                )
            ],
            {s: "admit: policy pause_ttl_ms changed" for s in AWAITING},
            "rule pause_expired: reads policy pause_ttl_ms, default 86400000 -> 3600000",
            id="a policy number a rule reads",
        ),
    ],
)
def test_the_diff_page_marks_the_states_whose_decision_rules_changed_and_no_other(tmp_path, edits, marked, words):
    page = decision_diff_page(tmp_path, "router_run", *edits)
    assert decided_states(page) == marked
    said = " ".join(decided_list(page).split())
    assert words in said
    states = list(marked)
    assert f"admit in {', '.join(states)}" in said  # the decision, and the states it changed in
    assert '<td class="decided">orange box</td><td>a state where a decision' in page  # the legend says what it is
    tip = re.search(r'class="node decided">\s*<title>[^<]*</title>\s*<g [^>]*><a xlink:title="([^"]*)"', page)
    assert tip is not None and words in html.unescape(tip.group(1))  # and hovering the state says it too


def test_a_rule_every_state_tries_marks_the_states_it_is_reached_in(tmp_path):
    # agent_loop's deadline_passed has no states: it is tried everywhere, but in a final state
    # terminal_is_forever answers first, so only the live states can be answered differently
    deadline = (
        "        result: {name: answer, params: {value: expire}}\n        description: the run is no longer valid"
    )
    page = decision_diff_page(tmp_path, "agent_loop", (deadline, deadline.replace("expire}", "audit}")))
    live = ["planning", "awaiting_tool", "executing_tool", "observing_result", "awaiting_approval", "recovering"]
    assert decided_states(page) == {s: "resume: 1 rule changed" for s in live}
    said = " ".join(decided_list(page).split())
    assert said.count("resume in") == 1  # one change said once, with every state it changed in
    assert (
        f"resume in {', '.join(live)} rule deadline_passed: answer answer(value=expire) -> answer(value=audit)" in said
    )


def test_a_diff_without_a_decision_change_marks_nothing(tmp_path):
    page = decision_diff_page(
        tmp_path,
        "agent_loop",
        ("        description: ask the model\n", "        description: ask the model again\n"),  # a rule reworded
        ("description: the runtime checks the call\n", "description: the runtime checks it\n"),  # an arrow reworded
    )
    assert "decision resume rule plan: description" in page  # loopfsm diff's words list the rewording
    arrows = json.loads(page.split('id="diff">', 1)[1].split("</script>", 1)[0])
    assert arrows["changed"] == [["planning", "awaiting_tool"]]  # the reworded arrow is marked, as before
    assert decided_states(page) == {}
    assert '<h2>Decision rules changed</h2><ul class="decisions"><li>none</li></ul>' in page


def test_rules_swapped_that_no_state_tries_together_mark_nothing_and_say_so(tmp_path):
    page = decision_diff_page(
        tmp_path, "router_run", (DECRYPT_ANSWER + APPROVAL_ANSWER, APPROVAL_ANSWER + DECRYPT_ANSWER)
    )
    assert decided_states(page) == {}
    said = " ".join(decided_list(page).split())
    assert said.startswith("admit in no state: each state tries the same rules, with the same answers, as before")
    assert "decision admit: rule order" in said


def test_marking_decision_rules_moves_no_state_of_the_picture(tmp_path):
    ttl = (
        "  pause_ttl_ms:\n    type: integer\n    default: 86400000",
        "  pause_ttl_ms:\n    type: integer\n    default: 1",
    )
    marked = decision_diff_page(tmp_path, "router_run", ttl)
    plain = decision_diff_page(tmp_path, "router_run")
    assert len(decided_states(marked)) == 4 and decided_states(plain) == {}

    def places(page: str) -> dict[str, tuple[float, float]]:
        """Where each state's name is written (its first text; the words beside it come after)."""
        out = {}
        for m in re.finditer(
            r'<g id="node\d+" class="node[^"]*">\s*<title>([^<]*)</title>(.*?)(?=<!--|</svg>)', page, re.S
        ):
            at = re.search(r'<text [^>]*x="([-\d.]+)" y="([-\d.]+)"', m.group(2))
            if at is not None:
                out[html.unescape(m.group(1))] = (float(at.group(1)), float(at.group(2)))
        return out

    a, b = places(marked), places(plain)
    assert set(a) == set(b) and len(a) > 5
    # the words beside the boxes may widen the drawing: everything then shifts alike, nothing moves apart
    dx, dy = (a["Idle"][0] - b["Idle"][0], a["Idle"][1] - b["Idle"][1])
    assert {t: (round(x - dx, 1), round(y - dy, 1)) for t, (x, y) in a.items()} == {
        t: (round(x, 1), round(y, 1)) for t, (x, y) in b.items()
    }


def test_a_change_too_long_for_a_hover_text_still_draws_the_picture_and_is_listed_whole(tmp_path):
    long_value = "x" * 17_000  # over Graphviz's 16 KiB string limit, as a hover text would have been whole
    page = decision_diff_page(tmp_path, "router_run", (SEALING, SEALING.replace("not_allowed", long_value)))
    assert "<svg" in page and "could not be drawn" not in page
    assert decided_states(page) == {"AwaitingEncrypt": "admit: 1 rule changed"}
    assert long_value in decided_list(page)  # the list keeps every word
    svg = page.split("<svg", 1)[1].split("</svg>", 1)[0]
    assert long_value not in svg and "more characters: Decision rules changed lists them all" in svg


def test_a_removed_decision_says_so_beside_each_state_it_answered_in(tmp_path):
    text = (ROOT / "machines" / "router_run.yaml").read_text()
    block = text[text.index("  continuations:\n") : text.index("  mediate:\n")]
    page = decision_diff_page(tmp_path, "router_run", (block, ""))
    marked = decided_states(page)
    assert marked and set(marked.values()) == {"continuations: decision removed"}


def test_the_diff_page_says_when_the_new_file_does_not_pass_check(tmp_path, capsys):
    shipped = (ROOT / "machines" / "router_run.yaml").read_text()
    assert SEALING in shipped
    new = tmp_path / "router_run.yaml"
    new.write_text(shipped.replace(SEALING, SEALING.replace("states: [AwaitingEncrypt]", "states: [Nowhere]"), 1))
    old = str(ROOT / "machines" / "router_run.yaml")
    assert main(["diff", old, str(new)]) == 1
    said = [line for line in capsys.readouterr().out.splitlines() if "does not pass `loopfsm check`" in line]
    assert said and "Nowhere" in said[0]
    assert main(["review", "--diff", old, str(new), "--static", str(tmp_path / "site")]) == 0
    capsys.readouterr()
    page = (tmp_path / "site" / "index.html").read_text()
    assert html.escape(said[0].strip()) in page and 'class="refused-check"' in page
    fine = tmp_path / "fine.yaml"
    fine.write_text(shipped.replace(SEALING, SEALING.replace("not_allowed", "busy"), 1))
    assert main(["review", "--diff", old, str(fine), "--static", str(tmp_path / "fine")]) == 0
    assert 'class="refused-check"' not in (tmp_path / "fine" / "index.html").read_text()
