"""bench/compat/run.py's pure parts: conformance buckets and the table, with and without node.

The runner itself is ``make compat`` (it installs npm packages, so it is not a test); the
TypeScript SDK client is exercised against a real lab here when ``make compat`` has
installed it.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

import pytest

from bench.compat import run as compat
from tests.support import skips
from tests.support.lab import LabServer


def test_conformance_checks_are_bucketed_not_hidden() -> None:
    sc = compat.Scenario("server-stateless", True, [])
    assert sc.bucket({"status": "SUCCESS"}) == "passed"
    assert sc.bucket({"status": "SKIPPED"}) == "skipped/info"
    fixture = "Not testable: server does not list the diagnostic tool 'test_logging_tool'"
    assert sc.bucket({"status": "FAILURE", "errorMessage": fixture}) == "needs fixture"
    assert sc.bucket({"status": "FAILURE", "errorMessage": "Unknown tool: test_simple_text"}) == (
        "needs fixture"
    )
    prompts = "Failed: Method not found: prompts/get"
    assert sc.bucket({"status": "FAILURE", "errorMessage": prompts}) == "not implemented"
    wrong = "expected HTTP 400, got 200"
    assert sc.bucket({"status": "FAILURE", "errorMessage": wrong}) == "failed"
    mrtr = compat.Scenario("input-required-result-multi-round", True, [])
    assert mrtr.bucket({"status": "FAILURE", "errorMessage": "Expected InputRequiredResult"}) == (
        "needs fixture"
    )


def _client(key: str, statuses: list[str], outcome: str) -> dict[str, Any]:
    items = [
        {"id": i, "title": i, "status": s, "note": "", "evidence": [{"line": f"{i} line"}]}
        for i, s in zip(compat.ITEM_IDS, statuses, strict=True)
    ]
    return {
        "key": key,
        "era": "2026-07-28",
        "userAgent": "ua",
        "items": items,
        "mistakes": [],
        "outcome": outcome,
    }


def test_table_rows_marks_and_a_missing_node_said_out_loud() -> None:
    ours = compat.Run("ours", "mcpsub 0.1.0", "cmd", exit_code=0, keys=["a 1"])
    ts = compat.Run(
        "ts", "@modelcontextprotocol/client ?", "node …", note="not run: node is not installed"
    )
    report = {"clients": [_client("a 1", ["pass"] * 6 + ["fail"], "incomplete")]}
    scenario = compat.Scenario(
        "tools-list", True, [{"id": "x", "status": "FAILURE", "errorMessage": "boom"}]
    )
    text = compat.render([ours, ts], report, "node not found", [scenario], "suite")
    assert (
        "| ours | mcpsub 0.1.0 (clientInfo `a 1`) | 2026-07-28 | ✅ | ✅ | ✅ | ✅ | ✅ | ✅ | ❌ | **incomplete** |"
        in text
    )
    assert (
        "| ts | @modelcontextprotocol/client ? | – | – | – | – | – | – | – | – | not run: node is not installed |"
        in text
    )
    assert "- ❌ closed: `closed line`" in text
    assert "| tools-list | yes | 0 | 1 | 0 | 0 | 0 | `x` (failed: boom) |" in text


TS_CLIENT = compat.HERE / "node_modules" / "@modelcontextprotocol" / "client"


@pytest.mark.skipif(
    shutil.which("node") is None or not TS_CLIENT.exists(),
    reason=skips.because("npm-trees", "the pinned TypeScript SDK (bench/compat)"),
)
def test_typescript_sdk_client_verdicts(lab_server_factory: Any) -> None:
    lab: LabServer = lab_server_factory({"MCP_TEST_UPDATE_DELAY_SECONDS": "0.2"})
    node = shutil.which("node")
    assert node is not None
    script = str(compat.HERE / "ts_client.mjs")
    default = subprocess.run([node, script, lab.url, "default"], capture_output=True, timeout=60)
    auto = subprocess.run([node, script, lab.url, "auto"], capture_output=True, timeout=60)
    assert (default.returncode, auto.returncode) == (1, 0), auto.stdout
    clients = {c["key"].split(" ")[0]: c for c in lab.http.get("/lab/report").json()["clients"]}
    assert clients["ts-sdk-client-default"]["era"] == "2025 only"
    assert [m["id"] for m in clients["ts-sdk-client-default"]["mistakes"]] == ["legacy-only"]
    assert clients["ts-sdk-client-auto"]["outcome"] == "passed"


def test_faults_only_replaces_the_fault_section_and_keeps_the_rest() -> None:
    before = "# Matrix\n\nrows\n\n" + compat.FAULTS_HEAD + "\n\nold table\n\n## Notes\n\n- kept\n"
    row = compat.FaultRow("a fault", "mcpsubd 0.1.0", 0, 2, "passed", [], ["notified"])
    after = compat.replace_faults_block(before, [row])
    assert after.startswith("# Matrix\n\nrows\n\n" + compat.FAULTS_HEAD)
    assert after.endswith("## Notes\n\n- kept\n")
    assert "old table" not in after
    assert "| a fault | mcpsubd 0.1.0 | 0 | 2 | passed | notified | – |" in after
    labels = [label for label, _, _ in compat.FAULTS]
    assert len(labels) == len(set(labels)) >= 20
