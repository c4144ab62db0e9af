"""Which module adds which ``mcpsubctl`` commands: the one table to extend.

A new command group is a module with a function ``(subparsers, commands) -> None`` that adds
its parsers and puts its handlers in ``commands`` (name → ``fn(args) -> exit code``), plus
one row here. The order of the rows is the order of ``mcpsubctl --help``.

The names matter for start-up: ``mcpsubctl read …`` builds only the parser of the group
that owns ``read`` (:func:`cli.ctl.build_parser`), so a daemon command called in a loop by
an agent script does not import and build thirty other commands (``results/cli.md``).
``--help``, completion and man pages build every group.
"""

from __future__ import annotations

GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # (module, function, the commands it adds)
    (
        "cli.subscription_cmds",
        "register",
        ("subscribe", "unsubscribe", "list", "show", "status", "resubscribe"),
    ),
    ("cli.event_cmds", "register", ("events", "read")),
    ("cli.wait_cmd", "register", ("wait",)),
    ("cli.webhook_cmds", "add_webhook_commands", ("webhook", "deliveries")),
    ("cli.trigger_cmds", "add_trigger_commands", ("trigger",)),
    ("cli.service_cmds", "add_service_commands", ("service",)),
    ("cli.face_cmds", "add_face_command", ("mcp",)),
    ("cli.agent_cmds", "add_agent_commands", ("tail", "hook")),
    ("cli.agent_run", "add_agent_run_command", ("agent-run",)),
    ("cli.plugin_cmds", "add_plugin_commands", ("plugin",)),
    ("cli.ui_cmds", "add_ui_command", ("ui",)),
    ("cli.skills_cmds", "add_skills_commands", ("skills",)),
)
"""Command groups in their own modules, after ctl.py's own (probe, call, login, logout)."""


def owner(command: str) -> str | None:
    """The module adding ``command``, or None when it is not in :data:`GROUPS`."""
    for module, _function, names in GROUPS:
        if command in names:
            return module
    return None
