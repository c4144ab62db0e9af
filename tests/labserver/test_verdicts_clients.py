"""Per-client verdicts driven by real clients against a real lab subprocess.

Each client runs as its own process against one lab (that is how the lab is used: many
clients, one server, the log grouped by clientInfo), then the test reads the verdict
from ``GET /lab/report`` and checks the console line. The bad clients are small httpx
scripts in ``tests/peers/clients/``; the good ones are our CLIs and the official Python
SDK client.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.lab import LabServer

CLIENTS = Path(__file__).resolve().parents[1] / "peers" / "clients"
REVIEW = "test://review/status"


def run_script(name: str, url: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(CLIENTS / name), url],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stderr
    return done


def verdict(lab: LabServer, key: str) -> dict[str, Any]:
    clients = lab.http.get("/lab/report").json()["clients"]
    found = [c for c in clients if c["key"] == key]
    assert found, f"no client {key!r} in {[c['key'] for c in clients]}"
    return found[0]


def statuses(client: dict[str, Any]) -> dict[str, str]:
    return {item["id"]: item["status"] for item in client["items"]}


def mistakes(client: dict[str, Any]) -> list[str]:
    return [m["id"] for m in client["mistakes"]]


ALL_PASS = {
    k: "pass" for k in ("connected", "listed", "read", "listened", "notified", "reread", "closed")
}


@pytest.fixture
def lab(lab_server_factory: Any) -> LabServer:
    server: LabServer = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.2"})
    return server


def test_our_probe_and_drop_in_pass_every_item(lab: LabServer) -> None:
    probe = run_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json")
    assert probe.code == 0, probe.stderr
    dropin = run_cli("mcp-resource-subscriber", "--url", lab.url, "--json")
    assert dropin.code == 0, dropin.stderr
    for key in ("mcpsubctl 0.1.0", "mcp-resource-subscribe-probe-client 0.1.0"):
        client = verdict(lab, key)
        assert statuses(client) == ALL_PASS, client
        assert client["mistakes"] == []
        assert client["outcome"] == "passed"
        assert client["era"] == "2026-07-28"
        # Evidence is the log itself: the re-read is a version 2 read after the update.
        reread = next(i for i in client["items"] if i["id"] == "reread")
        assert "version=2" in reread["evidence"][-1]["line"]
        assert reread["evidence"][0]["seq"] < reread["evidence"][-1]["seq"]
        lab.wait_for_line(f"[lab/verdict] {key}: passed the full cycle")
    report = lab.http.get("/lab/report.md").text
    assert "## mcpsubctl 0.1.0" in report and "## mcp-resource-subscribe-probe-client" in report
    assert "❌" not in report


def test_repeated_drop_in_runs_are_sessions_not_polling(lab: LabServer) -> None:
    # Seed 000: "repeated probes each see the update". Three runs, one lab, one clientInfo.
    for _ in range(3):
        done = run_cli("mcp-resource-subscriber", "--url", lab.url, "--json")
        assert done.code == 0, done.stderr
        assert '"version": 2' in done.stdout or "reviewed" in done.stdout
    client = verdict(lab, "mcp-resource-subscribe-probe-client 0.1.0")
    assert client["mistakes"] == [], client["mistakes"]
    assert client["outcome"] == "passed"
    reads = [e for e in lab.log() if e["event"] == "resources.read"]
    assert [r["version"] for r in reads].count(2) >= 3  # each run saw the update


def test_official_python_sdk_client_passes(lab: LabServer) -> None:
    run_script("sdk_python.py", lab.url)
    clients = lab.http.get("/lab/report").json()["clients"]
    assert len(clients) == 1
    (client,) = clients
    assert client["userAgent"].startswith("python-httpx2/")  # the SDK's own HTTP stack
    assert statuses(client) == ALL_PASS, client
    assert client["outcome"] == "passed"


def test_polling_client_is_named(lab: LabServer) -> None:
    run_script("poller.py", lab.url)
    client = verdict(lab, "lab-poller 1.0.0")
    assert mistakes(client) == ["polling"]
    assert statuses(client)["listened"] == "fail"
    assert client["outcome"] == "failed"
    assert len(client["mistakes"][0]["evidence"]) == 3  # reads 2..4 were unprompted
    lab.wait_for_line("[lab/verdict] lab-poller 1.0.0: failed: Reads in a polling loop")


def test_client_that_never_rereads_is_named(lab: LabServer) -> None:
    run_script("no_reread.py", lab.url)
    client = verdict(lab, "lab-no-reread 1.0.0")
    items = statuses(client)
    assert items["notified"] == "pass" and items["closed"] == "pass"
    assert items["reread"] == "fail"
    assert mistakes(client) == ["never-rereads"]
    lab.wait_for_line("[lab/verdict] lab-no-reread 1.0.0: failed: Never re-reads")


def test_2025_era_client_is_told_it_speaks_only_2025_mcp(lab: LabServer) -> None:
    run_script("legacy_init.py", lab.url)
    client = verdict(lab, "lab-legacy 2025.1")
    assert client["era"] == "2025 only"
    assert statuses(client)["connected"] == "fail"
    assert mistakes(client) == ["legacy-only"]
    assert "-32022" in client["mistakes"][0]["evidence"][-1]["line"]
    lab.wait_for_line("[lab/verdict] lab-legacy 2025.1: failed: Speaks only 2025-era MCP")
    assert "Speaks only 2025-era MCP" in lab.http.get("/lab/report.md").text


def test_missing_routing_headers_are_named(lab: LabServer) -> None:
    run_script("no_headers.py", lab.url)
    client = verdict(lab, "lab-no-headers 1.0.0")
    assert mistakes(client) == ["headers"]
    lines = [e["line"] for e in client["mistakes"][0]["evidence"]]
    assert lines == [
        "server/discover: Mcp-Method missing, Mcp-Name n/a",
        "resources/read: Mcp-Method missing, Mcp-Name missing",
    ]


def test_clients_are_kept_apart_on_one_lab(lab: LabServer) -> None:
    run_script("poller.py", lab.url)
    run_cli("mcpsubctl", "probe", "--url", lab.url, "--uri", REVIEW, "--json")
    keys = [c["key"] for c in lab.http.get("/lab/report").json()["clients"]]
    assert keys == ["lab-poller 1.0.0", "mcpsubctl 0.1.0"]
    assert verdict(lab, "mcpsubctl 0.1.0")["outcome"] == "passed"


def test_report_command_prints_the_markdown(lab: LabServer) -> None:
    run_script("no_reread.py", lab.url)
    printed = run_cli("mcp-lab-server", "report", "--url", lab.url)
    assert printed.code == 0, printed.stderr
    assert printed.stdout.startswith("# Lab report (")
    assert "## lab-no-reread 1.0.0" in printed.stdout
    assert "- ❌ Read it again after the notification" in printed.stdout
    as_json = run_cli("mcp-lab-server", "report", "--url", lab.base_url, "--json")
    assert as_json.json["clients"][0]["key"] == "lab-no-reread 1.0.0"


def test_report_command_unreachable_lab_is_one_line_and_exit_1() -> None:
    result = run_cli("mcp-lab-server", "report", "--url", "http://127.0.0.1:9/mcp")
    assert result.code == 1
    assert result.stdout == ""
    assert result.stderr.startswith("mcp-lab-server report: cannot reach http://127.0.0.1:9/lab/")
    assert "Traceback" not in result.stderr


def test_report_is_served_without_the_control_surface(lab_server_factory: Any) -> None:
    lab = lab_server_factory({"MCP_TEST_CONTROL": "false"})
    assert lab.http.get("/lab/state").status_code == 404
    response = lab.http.get("/lab/report.md")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/markdown")
    assert "No MCP client has talked to this lab yet." in response.text


def test_reset_empties_the_report_and_the_console_judges_again(lab: LabServer) -> None:
    run_script("poller.py", lab.url)
    lab.wait_for_line("[lab/verdict] lab-poller 1.0.0: failed")
    assert lab.control("POST", "/lab/reset").status_code == 200
    assert lab.http.get("/lab/report").json()["clients"] == []
    run_script("poller.py", lab.url)
    assert verdict(lab, "lab-poller 1.0.0")["outcome"] == "failed"

    def printed() -> int:
        return sum(line.startswith("[lab/verdict] lab-poller") for line in lab.lines)

    deadline = time.monotonic() + 5  # the console judges 0.2 s after the trigger
    while printed() < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # like LabServer.wait_for_line: stdout has no event to await
    assert printed() == 2
