"""The fallback breaker around the model: a failing primary trips it and the run completes on the fallback."""

from __future__ import annotations

from loopfsm.router.errors import ProviderError
from loopfsm.router.providers.scripted import ScriptedProvider

from tests.support.router_support import client, make


class Down:
    """A primary model that is down: every call fails with a transient error."""

    name = "down"

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, request):
        self.calls += 1
        raise ProviderError("down", "transient", "connection reset")


def test_failing_primary_trips_to_fallback_and_run_completes(tmp_path):
    primary = Down()
    router, tc = make(
        f"sqlite:///{tmp_path / 'r.db'}",
        "loopfsm_",
        None,
        create=True,
        provider=primary,
        fallback=ScriptedProvider([{"text": "answered by the fallback"}]),
        max_model_attempts=4,
    )
    resp = client(tc, "f", tmp_path).run("hello")
    assert resp["status"] == "completed" and resp["data"]["message"] == "answered by the fallback"
    trip_after = router.breaker.compiled.default_policy.trip_after
    assert primary.calls == trip_after and router.breaker.state == "Fallback"
    events = [r.meta["event"] for r in router.store().rows("f", "trace")]
    assert events.count("model.called") == trip_after + 1 and events.count("model.responded") == 1
    router.close()


def test_model_failure_ends_the_run_as_failed_with_nothing_left_locked(tmp_path):
    router, tc = make(
        f"sqlite:///{tmp_path / 'r.db'}",
        "loopfsm_",
        None,
        create=True,
        provider=Down(),
        fallback=Down(),
        max_model_attempts=2,
    )
    resp = client(tc, "g", tmp_path).run("hello")
    assert resp["status"] == "idle" and resp["data"]["ended"] == "failed"
    assert "model call failed" in resp["data"]["error"]
    rec = router.store().load("g")
    assert rec.phase == "Idle" and rec.holder is None
    router.close()
