"""A router session's own run, read back from the store with ``loopfsm store trace``, steps through on its page.

The session is a real one: the router and the reference client on SQLite, a
scripted model asking for two tools.  Its trace file goes to router_run's page
as a reviewer uploads it, and each step lands in the state the store recorded,
with no invariant broken on the way.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from starlette.testclient import TestClient

from loopfsm import compile_spec, load
from loopfsm.cli.main import main
from loopfsm.core.registries import registry_named
from loopfsm.review_site.app import create_app
from loopfsm.review_site.pages import SiteMachine

from tests.support.router_support import TOOLS_SCRIPT, client, make

ROOT = Path(__file__).resolve().parents[2]


def test_a_router_sessions_trace_steps_through_to_where_the_store_has_it(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    assert main(["store", "init", url]) == 0
    router, tc = make(url, "loopfsm_", TOOLS_SCRIPT)
    assert client(tc, "s1", tmp_path).run("tidy up")["status"] == "completed"
    router.close()
    out = tmp_path / "s1.trace.yaml"
    assert main(["store", "trace", url, "s1", "-o", str(out)]) == 0
    capsys.readouterr()
    recorded = [step["state"] for step in yaml.safe_load(out.read_text())["steps"]]
    assert recorded[0] == "AwaitingTool" and recorded[-1] == "Idle"

    path = ROOT / "machines" / "router_run.yaml"
    spec = load(path)
    site = TestClient(
        create_app([SiteMachine(path, compile_spec(spec, registry_named(spec.registry)))]),
        base_url="http://127.0.0.1",
        headers={"content-type": "application/json"},
    )
    view = site.post("/api/router_run/trace", content=out.read_bytes()).json()
    assert view["state"] == "Idle" and view["pending_count"] == len(recorded)
    seen, broken = [], []
    while view["pending"]:
        body = site.post("/api/router_run/next").json()
        view = body["view"]
        seen.append(view["state"])
        broken += body["outcome"]["broken"]
    assert seen == recorded and broken == []
