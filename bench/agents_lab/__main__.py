"""``python -m bench.agents_lab``: the agent lab.

* ``report [--changes N] [--dump FILE | --load FILE] [--note TEXT]``: every scenario, one CLI at a time,
  into results/agents.md and results/compatibility.md (bench/agents_lab/report.py);
* ``scenario NAME --cli CLI [--transport stdio|http] [--changes N] [--mode oneshot|resume]``:
  one scenario (bench/agents_lab/scenarios.py), its facts as one JSON object on stdout.

Everything runs inside a fresh loopback-only network namespace: the command re-executes
itself under ``unshare -n`` first (root, or a user namespace that allows it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench.agents_lab import netns


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.agents_lab")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("scenario", help="run one scenario, print its facts as JSON")
    one.add_argument("name")
    one.add_argument("--cli", required=True)
    one.add_argument("--transport", default="stdio", choices=["stdio", "http"])
    one.add_argument("--changes", type=int, default=1)
    one.add_argument("--mode", default="oneshot", choices=["oneshot", "resume"])
    one.add_argument("--flag", default="development", choices=["development", "channels"])
    one.add_argument("--session", action="store_true", help="agentrun: continue a session")
    one.add_argument("--via", default="trigger", choices=["trigger", "pipe"])
    one.add_argument("--way", default="monitor", choices=["monitor", "rewake"])
    trig = sub.add_parser("triggers", help="agents started or woken by a change; results/")
    trig.add_argument("--changes", type=int, default=20)
    trig.add_argument(
        "--out-dir", type=Path, default=Path(__file__).resolve().parents[2] / "results"
    )
    trig.add_argument("--dump", type=Path, help="also save the raw facts (JSON)")
    trig.add_argument("--note", default="", help="a sentence for the block's header")
    trig.add_argument("--load", type=Path, help="render a saved run instead of running")
    rep = sub.add_parser("report", help="run every scenario; write results/")
    rep.add_argument("--changes", type=int, default=20)
    rep.add_argument(
        "--out-dir", type=Path, default=Path(__file__).resolve().parents[2] / "results"
    )
    rep.add_argument("--dump", type=Path, help="also save the raw facts (JSON)")
    rep.add_argument("--load", type=Path, help="render a saved run instead of running")
    rep.add_argument(
        "--note", default="", help="a sentence for the results header (what else ran alongside)"
    )
    args = parser.parse_args(argv)
    if args.command == "triggers" and args.load is not None:
        from bench.agents_lab import triggered

        return triggered.main(args.changes, args.out_dir, load=args.load)
    if args.command == "report" and args.load is not None:
        from bench.agents_lab import report

        return report.main(args.changes, args.out_dir, load=args.load, note=args.note)
    try:
        netns.reexec_inside()
    except netns.NetnsError as exc:
        print(f"agents lab: {exc}", file=sys.stderr)
        return 3
    from bench.agents_lab import scenarios, triggered

    scenarios.SCENARIOS.update(triggered.SCENARIOS)

    if args.command == "triggers":
        return triggered.main(args.changes, args.out_dir, note=args.note, dump=args.dump)
    if args.command == "report":
        from bench.agents_lab import report

        return report.main(args.changes, args.out_dir, dump=args.dump, note=args.note)
    if args.command == "scenario":
        run = scenarios.SCENARIOS[args.name]
        kwargs: dict[str, object] = {"cli": args.cli}
        if args.name == "wait":
            kwargs.update(transport=args.transport, changes=args.changes)
        elif args.name == "hook":
            kwargs.update(mode=args.mode)
        elif args.name == "channel":
            kwargs.update(flag=args.flag)
        elif args.name == "wake":
            kwargs.update(way=args.way)
        elif args.name == "agentrun":
            kwargs.update(session=args.session, via=args.via)
        facts = run(**kwargs)
        json.dump(facts, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
