"""Triggers end to end: the real mcpsubd, the real lab server, a real program (a Python
script that records its argv, stdin and environment; ``helpers.RECORDER``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lab import LabServer
from tests.support.poll import until
from tests.triggers.helpers import (
    FAST,
    LONG,
    add_trigger,
    put,
    recorder,
    records,
    run_detail,
    runs,
    subscribe,
    wait_runs,
)


@pytest.mark.usefixtures("database_url")  # both backends: the outbox's SQL runs on each
def test_a_change_runs_the_program_with_the_change(
    shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    """stdin is the webhook body (content included), the environment an allowlist plus the
    MCPSUB_* values, a placeholder a whole argument; the output tail is stored redacted."""
    put(shared_lab, uri, "hello $(touch /tmp/pwned) `id`")
    d = daemon_factory(env={**FAST, "CANARY_SECRET": "daemon-only", "PASSED_ON": "yes"})
    command, out = recorder(tmp_path)
    made = d.ctl(
        "trigger", "add", "--uri", "test://trig/*", "--name", "rec", "--env", "PASSED_ON",
        "--env", "SECRET_VALUE=s3cr3t-value", "--json", "--", *command, "{uri}", "--uri={uri}",
    )  # fmt: skip
    assert made.code == 0, made.stderr
    trigger = json.loads(made.stdout)
    assert trigger["env"] == ["PASSED_ON", "SECRET_VALUE"], "values are never shown"
    assert "s3cr3t-value" not in made.stdout
    subscribe(d, shared_lab.url, uri)

    [run] = wait_runs(d, trigger["id"], lambda rs: rs and rs[0]["state"] == "succeeded")
    [(name, record)] = records(out).items()
    assert name == f"{run['id']}-1"
    body = json.loads(record["stdin"])
    assert body["type"] == "resource.updated" and body["uri"] == uri
    assert body["revision"] == 1 and body["server"] == shared_lab.url
    assert body["contents"][0]["text"] == "hello $(touch /tmp/pwned) `id`"
    assert body["id"] == f"run_{run['id']}" and body["eventId"] == run["eventId"]
    env = record["env"]
    assert env["MCPSUB_URI"] == uri.replace("[", "%5B").replace("]", "%5D")
    assert env["MCPSUB_REVISION"] == "1" and env["MCPSUB_ATTEMPT"] == "1"
    assert env["MCPSUB_EVENT_ID"] == str(run["eventId"])
    assert env["MCPSUB_SERVER"] == shared_lab.url
    assert env["PASSED_ON"] == "yes" and env["SECRET_VALUE"] == "s3cr3t-value"
    assert "CANARY_SECRET" not in env and "MCPSUB_STATE_DIR" not in env
    allowed = {"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME"}
    extra = {k for k in env if not k.startswith("MCPSUB_")} - allowed
    assert extra <= {"PASSED_ON", "SECRET_VALUE", "LC_CTYPE"}, extra
    # The placeholder is one whole argument; inside a larger one it is left as written.
    assert record["argv"][2:] == [env["MCPSUB_URI"], "--uri={uri}"]

    detail = run_detail(d, run["id"])
    [attempt] = detail["attempts"]
    assert attempt["exitCode"] == 0 and attempt["signal"] is None
    assert attempt["durationMs"] >= 0 and attempt["endedAt"] >= attempt["startedAt"]
    assert "hunter2" not in attempt["stdoutTail"] and "abc" not in attempt["stdoutTail"]
    assert "s3cr3t-value" not in attempt["stderrTail"]
    shown = d.ctl("trigger", "run", str(run["id"]))
    assert shown.code == 0, shown.stderr
    assert "attempt 1: exit 0" in shown.stdout
    assert "\x1b" not in shown.stdout and "\\x1b[31mred" in shown.stdout
    listed = d.ctl("trigger", "list")
    assert "rec" in listed.stdout and "succeeded 1" in listed.stdout
    metrics = d.api("GET", "/metrics").text
    assert "mcpsub_trigger_runs_started_total 1.0" in metrics
    assert "mcpsub_trigger_runs_succeeded_total 1.0" in metrics
    assert "mcpsub_trigger_run_duration_seconds_count 1.0" in metrics


@pytest.mark.usefixtures("database_url")
def test_failures_are_retried_then_dead_and_replayed(
    shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    put(shared_lab, uri, "v1")
    d = daemon_factory(env={**FAST, "MCPSUB_TRIGGER_ATTEMPTS": "3"})
    command, out = recorder(tmp_path)
    (out / "exit").write_text("3")
    trigger = add_trigger(d, command, uriPatterns=[uri])
    subscribe(d, shared_lab.url, uri)

    [run] = wait_runs(d, trigger["id"], lambda rs: rs and rs[0]["state"] == "dead")
    assert run["attempts"] == 3 and run["lastExit"] == 3
    assert "exit status 3" in run["lastError"]
    assert sorted(records(out)) == [f"{run['id']}-{n}" for n in (1, 2, 3)]
    attempts = run_detail(d, run["id"])["attempts"]
    assert [a["exitCode"] for a in attempts] == [3, 3, 3]

    tested = d.ctl("trigger", "test", str(trigger["id"]))
    assert tested.code == 1 and "attempt 1: exit 3" in tested.stdout, tested
    assert "error-code TRIGGER_TEST_FAILED" in tested.stdout or "exit status 3" in tested.stderr
    assert len(runs(d, trigger["id"])) == 1, "a test is not a run"
    (out / "exit").write_text("0")
    retried = d.ctl("trigger", "retry", str(run["id"]), "--json")
    assert retried.code == 0, retried.stderr
    wait_runs(d, trigger["id"], lambda rs: rs[0]["state"] == "succeeded")
    assert records(out)[f"{run['id']}-4"]["env"]["MCPSUB_ATTEMPT"] == "4"
    assert d.ctl("trigger", "test", str(trigger["id"])).code == 0
    assert d.ctl("trigger", "pause", str(trigger["id"])).code == 0
    assert "state:        paused" in d.ctl("trigger", "show", str(trigger["id"])).stdout
    assert d.ctl("trigger", "remove", str(trigger["id"])).code == 0
    gone = d.ctl("trigger", "show", str(trigger["id"]), "--json")
    assert gone.code == 7 and json.loads(gone.stdout)["errorCode"] == "TRIGGER_NOT_FOUND"


def test_latest_mode_burst_gives_at_most_two_runs(
    shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    put(shared_lab, uri, "v0")
    d = daemon_factory(env=FAST)
    command, out = recorder(tmp_path)
    (out / "hold").write_text("")
    trigger = add_trigger(d, command, uriPatterns=[uri], mode="latest")
    subscribe(d, shared_lab.url, uri)
    until("the first run in flight", lambda: records(out), LONG)
    for n in range(1, 11):
        put(shared_lab, uri, f"v{n}")

    def newest_stored() -> bool:
        answer = d.api("GET", "/v1/content", params={"uri": uri})
        return answer.status_code == 200 and "v10" in answer.text

    until("v10 stored", newest_stored, LONG)
    (out / "release").write_text("")
    done = wait_runs(
        d, trigger["id"], lambda rs: all(r["state"] in ("succeeded", "superseded") for r in rs)
    )
    ran = [r for r in done if r["state"] == "succeeded"]
    assert len(ran) <= 2, done
    last = records(out)[f"{ran[-1]['id']}-1"]
    assert json.loads(last["stdin"])["contents"][0]["text"] == "v10"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


def test_timeout_ends_the_process_group(
    shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    put(shared_lab, uri, "v1")
    d = daemon_factory(env={**FAST, "MCPSUB_TRIGGER_ATTEMPTS": "1"})
    command, out = recorder(tmp_path)
    (out / "child").write_text("")
    trigger = add_trigger(d, command, uriPatterns=[uri], timeoutS=1)
    subscribe(d, shared_lab.url, uri)

    [run] = wait_runs(d, trigger["id"], lambda rs: rs and rs[0]["state"] == "dead")
    [attempt] = run_detail(d, run["id"])["attempts"]
    assert attempt["timedOut"] and attempt["signal"] == "SIGTERM"
    assert run["lastSignal"] == "SIGTERM" and "TIMEOUT" in run["lastError"]
    child = int((out / f"{run['id']}-1.child").read_text())
    until("the program's child ended with its group", lambda: _gone(child), LONG)


@pytest.mark.parametrize("how", ["restart", "kill9"])
def test_a_run_in_flight_runs_again_after_the_daemon_comes_back(
    how: str, shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    put(shared_lab, uri, "v1")
    d = daemon_factory(env=FAST)
    command, out = recorder(tmp_path)
    (out / "hold").write_text("")
    trigger = add_trigger(d, command, uriPatterns=[uri])
    subscribe(d, shared_lab.url, uri)
    [first] = until("the run in flight", lambda: list(records(out).values()), LONG)
    if how == "kill9":
        d.kill()
    else:
        assert d.stop() == 0
    again = daemon_factory(state_dir=d.state_dir, env=FAST)
    until("the same run started again", lambda: len(records(out)) == 2, LONG)
    run_id = first["env"]["MCPSUB_RUN_ID"]
    assert sorted(records(out)) == [f"{run_id}-1", f"{run_id}-2"]
    (out / "release").write_text("")
    [run] = wait_runs(again, trigger["id"], lambda rs: rs and rs[0]["state"] == "succeeded")
    assert runs(again, trigger["id"]) == [run]
    interrupted, second = run_detail(again, run["id"])["attempts"]
    assert "INTERRUPTED" in interrupted["error"] and second["exitCode"] == 0
    if how == "restart":  # a stop ends the program's group; kill -9 leaves it to finish
        assert _gone(first["pid"])


def test_no_more_programs_run_at_once_than_the_daemon_allows(
    shared_lab: LabServer, uri: str, daemon_factory: Any, tmp_path: Path
) -> None:
    """Three triggers that may each run two at once, one change, trigger_max_running 2:
    two programs run, the third run waits recorded, and starts when one ends."""
    put(shared_lab, uri, "v1")
    d = daemon_factory(env={**FAST, "MCPSUB_TRIGGER_MAX_RUNNING": "2"})
    command, out = recorder(tmp_path)
    (out / "hold").write_text("")
    triggers = [add_trigger(d, command, uriPatterns=[uri], concurrency=2) for _ in range(3)]
    subscribe(d, shared_lab.url, uri)

    def states() -> list[str]:
        found = d.api("GET", "/v1/triggers/runs").json()["runs"]
        return sorted(r["state"] for r in found)

    until("two running, one waiting", lambda: states() == ["pending", "running", "running"], LONG)
    until("two programs started", lambda: len(records(out)) == 2, LONG)
    (out / "release").write_text("")
    for trigger in triggers:
        wait_runs(d, trigger["id"], lambda rs: rs and rs[0]["state"] == "succeeded")
    running = peak = 0
    for line in (out / "log").read_text().splitlines():
        running += 1 if line.startswith("start") else -1
        peak = max(peak, running)
    assert peak == 2 and len(records(out)) == 3
