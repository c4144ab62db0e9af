"""``make agents-lab``: every scenario, one CLI at a time, written into results/.

* results/agents.md gets the block "Agent CLIs in the lab" (Matrix 2: mcpsub in each CLI);
* results/compatibility.md gets the block "Agent CLIs judged by the lab server" (Matrix 1:
  the lab's own ``/lab/report`` verdict per CLI, with its evidence lines).

Each block sits between ``<!-- agents-lab:start -->`` and ``<!-- agents-lab:end -->``; the
other benches that write those files keep it (:func:`keep_block`). Runs inside the private
namespace (``python -m bench.agents_lab report`` enters it).
"""

from __future__ import annotations

import datetime
import json
import platform
import re
import subprocess
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.agents_lab import scenarios
from bench.harness import REPO_ROOT, load_average, markdown_table, percentile

START, END = "<!-- agents-lab:start -->", "<!-- agents-lab:end -->"
LATENCY_TARGET_S = 0.5
CLIS = ["claude-code", "codex", "gemini", "opencode"]


BLOCKS = ((START, END), ("<!-- agents-lab-triggers:start -->", "<!-- agents-lab-triggers:end -->"))
"""The blocks ``make agents-lab`` writes (bench/agents_lab/triggered.py writes the second)."""


def keep_block(path: Path, text: str) -> str:
    """``text`` with the agent lab's blocks of the file at ``path`` (if any) appended, so a
    bench that rewrites the file does not drop what ``make agents-lab`` measured."""
    if not path.exists():
        return text
    old = path.read_text(encoding="utf-8")
    for start, end in BLOCKS:
        if start in old and end in old and start not in text:
            block = old[old.index(start) : old.index(end) + len(end)]
            text = text.rstrip("\n") + "\n\n" + block + "\n"
    return text


def splice(path: Path, block: str) -> None:
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    body = f"{START}\n{block.strip()}\n{END}"
    if START in old and END in old:
        new = old[: old.index(START)] + body + old[old.index(END) + len(END) :]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(new, encoding="utf-8")


def attempt(log: list[str], name: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    print(f"agents-lab: {name} …", flush=True)
    try:
        facts = run()
    except Exception as exc:  # a CLI that breaks is a finding, not the end of the bench
        log.append(f"{name}: {exc!r}")
        return {"error": repr(exc), "trace": traceback.format_exc()[-1500:]}
    print(f"agents-lab: {name} done", flush=True)
    return facts


def collect(changes: int) -> dict[str, Any]:
    errors: list[str] = []
    out: dict[str, Any] = {"errors": errors, "clis": {}}
    for cli in CLIS:
        facts: dict[str, Any] = {}
        facts["labjudge"] = attempt(errors, f"{cli} lab", lambda c=cli: scenarios.labjudge(c))
        for transport in ("stdio", "http"):
            facts[f"wait-{transport}"] = attempt(
                errors,
                f"{cli} wait {transport}",
                lambda c=cli, t=transport: scenarios.wait(c, t, changes),
            )
        if cli != "opencode":
            for mode in ("oneshot", "resume"):
                facts[f"hook-{mode}"] = attempt(
                    errors, f"{cli} hook {mode}", lambda c=cli, m=mode: scenarios.hook(c, m)
                )
        out["clis"][cli] = facts
    claude = out["clis"]["claude-code"]
    claude["monitor"] = attempt(errors, "claude monitor", lambda: scenarios.monitor(changes=5))
    claude["channel"] = attempt(errors, "claude channel", lambda: scenarios.channel())
    for cli in ("claude-code", "codex", "gemini"):
        out["clis"][cli]["skill"] = attempt(
            errors, f"{cli} skill", lambda c=cli: scenarios.skill(c)
        )
    out["copilot"] = attempt(errors, "copilot", lambda: scenarios.others("copilot"))
    out["opencodeList"] = attempt(errors, "opencode list", lambda: scenarios.others("opencode"))
    return out


# ---- rendering ---------------------------------------------------------------------------------------
def fmt_s(values: list[float]) -> str:
    return f"{percentile(values, 50):.2f}" if values else "–"


def q(text: str, limit: int = 400) -> str:
    """A quote for a table cell or a line: one line, bounded, backticks escaped."""
    one = " ⏎ ".join(line for line in text.strip().splitlines() if line.strip())
    one = one.replace("`", "'").replace("|", "\\|")
    return one if len(one) <= limit else one[:limit] + " …"


def wait_row(label: str, transport: str, facts: dict[str, Any]) -> list[str]:
    if "error" in facts:
        return [label, transport, "error", "–", "–", "–", q(facts["error"], 120)]
    lat = [v for v in facts["latencies"] if v is not None]
    seen = sum(facts["seen"])
    p99 = percentile(lat, 99) if lat else None
    met = (
        "met"
        if p99 is not None and p99 <= LATENCY_TARGET_S and seen == len(facts["seen"])
        else "missed"
    )
    return [
        label,
        transport,
        f"{seen} / {len(facts['seen'])}",
        fmt_s(lat),
        f"{p99:.2f}" if p99 is not None else "–",
        f"{max(lat):.2f}" if lat else "–",
        met,
    ]


def render_agents(data: dict[str, Any], meta: str) -> str:
    lines = [
        "## Agent CLIs in the lab (`make agents-lab`)",
        "",
        meta,
        "",
        "Each CLI is the pinned npm release (bench/agents_lab/package-lock.json), run headless "
        "and one at a time inside a private network namespace with only `lo` "
        "(`unshare -n`), against the scripted model (bench/agents_lab/model.py), with "
        "`mcpsubd` and `mcp-lab-server` in the same namespace. The configs are the ones "
        "docs/agents.md shows; `mcpsubctl` is on `PATH` and finds the daemon through `HOME`.",
        "",
        "### A change reaches the model: `wait_for_change`",
        "",
        "The model calls `wait_for_change` (passing the cursor back each time); about 1 s later "
        "the lab changes the resource. Measured: from just before the change was sent to the "
        "lab until the model's next request arrived holding the new text. "
        f"Target: p99 ≤ {LATENCY_TARGET_S} s.",
        "",
    ]
    rows = []
    for cli in CLIS:
        facts = data["clis"].get(cli, {})
        for transport in ("stdio", "http"):
            f = facts.get(f"wait-{transport}", {"error": "not run"})
            label = f.get("label", cli)
            rows.append(
                wait_row(
                    label, "stdio (`mcpsubctl mcp`)" if transport == "stdio" else "HTTP (`/mcp`)", f
                )
            )
    lines += markdown_table(
        [
            "CLI",
            "transport",
            "changes seen",
            "p50 s",
            "p99 s",
            "max s",
            f"≤ {LATENCY_TARGET_S} s p99",
        ],
        rows,
        "llrrrrl",
    )
    lines += ["", "Connected, and the mcpsub tools in the model's first request:", ""]
    rows = []
    for cli in CLIS:
        for transport in ("stdio", "http"):
            f = data["clis"].get(cli, {}).get(f"wait-{transport}", {})
            if not f or "error" in f:
                continue
            names = [n for n in f.get("firstRequestTools", []) if "mcpsub" in n]
            shown = ", ".join(f"`{n}`" for n in names) or (
                "none in `tools`: Claude Code defers MCP tools, naming them "
                "(`mcp__mcpsub__wait_for_change`, …) in a system reminder"
            )
            connected = "✅" if all(f["seen"]) else "❌"
            rows.append([f["label"], transport, connected, shown])
    lines += markdown_table(["CLI", "transport", "connected", "tools"], rows, "llll")
    lines += ["", "What the model saw after a change (quoted from the request body):", ""]
    for cli in CLIS:
        f = data["clis"].get(cli, {}).get("wait-stdio", {})
        if f.get("modelSaw"):
            lines.append(f"* {f['label']}: `{q(f['modelSaw'], 500)}`")
    lines += [
        "",
        "### The prompt hook (`mcpsubctl hook AGENT`)",
        "",
        "A first run in the workspace, then a change, then a second run: a new one-shot "
        "session, or the first session resumed (`claude -p --continue`, `codex exec resume "
        "--last`, `gemini -p --resume latest`). Checked: the second run's first model request.",
        "",
    ]
    rows = []
    for cli in CLIS:
        facts = data["clis"].get(cli, {})
        for mode in ("oneshot", "resume"):
            f = facts.get(f"hook-{mode}")
            if f is None:
                label = "OpenCode 1.18.33" if cli == "opencode" else cli
                second = "new session" if mode == "oneshot" else "resumed"
                rows.append([label, second, "no prompt hooks in this CLI", ""])
                continue
            if "error" in f:
                rows.append([cli, mode, "error", q(f["error"], 160)])
                continue
            got = (
                "✅ in the first request"
                if f["uriInFirstRequest"]
                else "❌ not in the first request"
            )
            rows.append(
                [
                    f["label"],
                    "new session" if mode == "oneshot" else "resumed",
                    got,
                    f"`{q(f['modelSaw'], 260)}`",
                ]
            )
    lines += markdown_table(["CLI", "second run", "the change", "what the model saw"], rows, "llll")
    claude = data["clis"].get("claude-code", {})
    mon = claude.get("monitor", {})
    lines += ["", "### `mcpsubctl tail` under Claude Code's Monitor tool", ""]
    if "error" in mon or not mon:
        lines.append(f"Not measured: {q(mon.get('error', 'not run'))}")
    else:
        lat = [v for v in mon["latencies"] if v is not None]
        event = re.search(r"<event>(.*?)</event>", mon["modelSaw"], re.S)
        total = len(mon["latencies"])
        summaries = sum(mon.get("summarySeen", []))
        command = mon.get("command", f"mcpsubctl tail --uri '{scenarios.URI}'")
        lines.append(
            "`claude -p --allowedTools mcp__mcpsub Monitor 'Bash(mcpsubctl tail:*)'`: the model "
            f"starts the Monitor tool with `{command}` (what skills/pr-review-subscribe and "
            "skills/watch-resource tell Claude Code to run; the cursor is the daemon's newest "
            "event after the subscribe) and ends its turn. Each change's first line is "
            "`board: vN MARKER-…`, so its tail line should end with "
            '`first_change(server data)="+board: vN MARKER-…"`.'
        )
        lines += [
            "",
            *markdown_table(
                [
                    "changes (1 s apart)",
                    "woke the model (the line's `revision=N` in a new request)",
                    "that request held the first changed line (the summary)",
                    "change → request p50 s",
                    "max s",
                ],
                [
                    [
                        str(total),
                        f"{len(lat)} / {total}",
                        f"{summaries} / {total}",
                        fmt_s(lat),
                        f"{max(lat):.2f}" if lat else "–",
                    ]
                ],
                "rllrr",
            ),
            "",
            "The model saw a system reminder (an automated background-task event, not user "
            f"input) holding `<event>{q(event.group(1) if event else '', 300)}</event>`.",
        ]
    ch = claude.get("channel", {})
    lines += ["", "### Claude Code Channels (`mcpsubctl mcp --channel`)", ""]
    if "error" in ch or not ch:
        lines.append(f"Not measured: {q(ch.get('error', 'not run'))}")
    else:
        lines.append(
            f"Interactive `claude {' '.join(ch['argv'][1:])}` in a tmux pane (`-p` registers no "
            f"channel): negotiated `{ch['negotiatedProtocolVersion']}` (era `{ch['protocolEra']}`); "
            f"its debug log: `{ch['channelVerdict']}`. That is its own feature switch, asked of "
            "Anthropic's servers, which the lab cannot reach; docs/agents.md says what to enable."
        )
    lines += [
        "",
        "### Skills: `mcpsubctl skills install AGENT --project DIR`",
        "",
        "After the install, a one-shot run: the scripted model loads `pr-review-subscribe` the "
        "way the CLI offers skills (Claude Code's `Skill` tool, Codex reading the SKILL.md it "
        "lists, Gemini's `activate_skill`), then follows the route the skill names: `read` "
        "(keep the `eventId`), `wait_for_change` with `after` = that cursor; the lab changes "
        "the resource about 1 s after the call.",
        "",
    ]
    rows = []
    for cli in ("claude-code", "codex", "gemini"):
        f = data["clis"].get(cli, {}).get("skill")
        if not f or "error" in f:
            rows.append([cli, "error", q((f or {}).get("error", "not run"), 160), "", ""])
            continue
        yes = {True: "✅", False: "❌"}
        rows.append(
            [
                f["label"],
                f"{yes[f['listedInFirstRequest']]} `{q(f['listing'], 200)}`",
                yes[f["skillTextReachedModel"]],
                yes[f["newContentReachedModel"]],
                f"{f['latency']:.2f}" if f.get("latency") is not None else "–",
            ]
        )
    lines += markdown_table(
        [
            "CLI",
            "first request lists the skill",
            "skill text reached the model",
            "new content reached the model",
            "change → request s",
        ],
        rows,
        "llllr",
    )
    lines += ["", "### OpenCode and Copilot CLI", ""]
    oc = data.get("opencodeList", {})
    cp = data.get("copilot", {})
    for label, facts in (("OpenCode 1.18.33", oc), ("Copilot CLI 1.0.102", cp)):
        if "error" in facts or not facts:
            lines.append(f"* {label}: {q(facts.get('error', 'not run'))}")
            continue
        for transport in ("stdio", "http"):
            lst, run = facts[f"{transport}List"], facts[f"{transport}Run"]
            lines.append(
                f"* {label}, {transport}: `{q(' '.join(lst['argv'][1:]))}` → `{q(lst['output'], 200)}`; "
                f"a one-shot run (`{q(' '.join(run['argv'][1:3]))}`) exit {run['exit']}"
                + (f": `{q(run['output'], 260)}`" if run["exit"] else "")
                + (
                    f"; tools the model saw: {', '.join(facts[f'{transport}ModelSawTools'][:30])}"
                    if facts[f"{transport}ModelSawTools"]
                    else ""
                )
            )
    lines += [
        "* Goose: not installed: it ships no npm package (its CLI is a binary downloaded from "
        "GitHub releases, which this machine cannot reach).",
        "* Crush 0.96.1 (`@charmland/crush`): not installed: its npm postinstall downloads the "
        "binary from the network, so no offline install works.",
    ]
    if data["errors"]:
        lines += ["", "Errors during the run:", ""] + [f"* `{q(e, 300)}`" for e in data["errors"]]
    return "\n".join(lines)


ITEM_COLS = ["connected", "listed", "read", "listened", "notified", "reread", "closed"]
MARK = {"pass": "✅", "fail": "❌", "pending": "⏳", "n/a": "➖"}


def render_compat(data: dict[str, Any], meta: str) -> str:
    lines = [
        "## Agent CLIs judged by the lab server (`make agents-lab`)",
        "",
        meta,
        "",
        "Each CLI is configured with `mcp-lab-server` (2026-07-28 only, Streamable HTTP) as an "
        "MCP server named `lab`, in whatever era the CLI speaks, run one-shot against the "
        "scripted model: the model lists resources, reads `test://review/status`, and waits "
        "6 s in a shell while the lab publishes its update (`POST /lab/update`; it would reach "
        "any listen open by then). The verdicts are the lab's own (`GET /lab/report`).",
        "",
    ]
    rows = []
    evidence: list[str] = []
    for cli in CLIS:
        f = data["clis"].get(cli, {}).get("labjudge", {"error": "not run"})
        if "error" in f:
            rows.append([cli, "", "", *([""] * len(ITEM_COLS)), "", q(f["error"], 100)])
            continue
        saw = "✅" if f["modelSawUpdate"] else "❌"
        for client in f["report"]["clients"]:
            items = {i["id"]: i for i in client["items"]}
            rows.append(
                [
                    f["label"],
                    f"`{client['name']} {client['version']}`",
                    client["era"],
                    *[MARK.get(items[c]["status"], "?") if c in items else "" for c in ITEM_COLS],
                    saw,
                    f"**{client['outcome']}**",
                ]
            )
            evidence += [
                f"### {f['label']} (clientInfo `{client['name']} {client['version']}`)",
                "",
            ]
            for c in ITEM_COLS:
                item = items.get(c)
                if item is None:
                    continue
                line = (
                    item["evidence"][-1]["line"]
                    if item["evidence"]
                    else (item["note"] or "no such log entry")
                )
                evidence.append(
                    f"- {MARK.get(item['status'], '?')} {item['title']}: `{q(line, 300)}`"
                )
            for mistake in client["mistakes"]:
                ev = mistake["evidence"][-1]["line"] if mistake["evidence"] else ""
                evidence.append(f"- ⚠️ {mistake['title']}: `{q(ev, 300)}`")
            evidence.append(
                f"- The model's read: `{q(f['readResult'], 200) or '(no resource text reached the model)'}`; "
                f"after the update the model's next request {'held' if f['modelSawUpdate'] else 'did not hold'} "
                "`status: reviewed`."
            )
            err = (f["run"]["stderrTail"] + "\n" + f["run"]["stdoutTail"]).splitlines()
            reason = [ln for ln in err if "-32022" in ln] or [
                ln
                for ln in err
                if ("MCP" in ln or "unavailable tool" in ln) and "test://review/status" not in ln
            ]
            if reason:
                evidence.append(f"- The CLI said: `{q(reason[0], 400)}`")
            evidence.append("")
    lines += markdown_table(
        [
            "CLI",
            "clientInfo",
            "era",
            "2026-07-28",
            "list",
            "read",
            "listen honored",
            "update received",
            "re-read",
            "closed",
            "model saw the update",
            "verdict",
        ],
        rows,
        "llllllllllll",
    )
    lines += ["", *evidence]
    lines += [
        "Copilot CLI, Goose and Crush are not judged here: Copilot CLI needs a GitHub login "
        "for any run; Goose and Crush do not install offline (results/agents.md).",
    ]
    return "\n".join(lines)


def main(
    changes: int,
    out_dir: Path,
    dump: Path | None = None,
    load: Path | None = None,
    note: str = "",
) -> int:
    """Run everything (or, ``load``, re-render a run saved with ``dump``) into ``out_dir``;
    ``note`` (what else ran on the machine, say) ends the header line of both blocks."""
    started = datetime.datetime.now(datetime.UTC)
    load_before = load_average()
    if load is not None:
        saved = json.loads(load.read_text())
        data, meta = saved["data"], saved["meta"]
    else:
        data = collect(changes)
        meta = ""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    ).stdout.strip()
    meta = meta or (
        f"Generated by `make agents-lab` (bench/agents_lab) on {started:%Y-%m-%d %H:%M} UTC "
        f"(`{commit}`), {changes} changes per `wait_for_change` run; Python "
        f"{platform.python_version()}, node {node_version()}; load average {load_before} → "
        f"{load_average()} (a shared 2-core machine)."
    )
    if dump is not None:
        dump.write_text(json.dumps({"meta": meta, "data": data}, indent=1, default=str))
    if note:
        meta = f"{meta} {note.strip()}"
    splice(out_dir / "agents.md", render_agents(data, meta))
    splice(out_dir / "compatibility.md", render_compat(data, meta))
    print(f"agents-lab: wrote {out_dir / 'agents.md'} and {out_dir / 'compatibility.md'}")
    return 0


def node_version() -> str:
    done = subprocess.run(["node", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip() or "?"
