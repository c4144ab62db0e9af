"""The part of the Compose Specification our compose files use, as a JSON schema of our own.

Written from the specification's text (compose-spec.io, "Compose file" and "Services top-level
element"), not copied from its repository: every object we write is closed, so a misspelt or
misplaced key fails, and every value has the type the specification gives it. A key the
specification has that we do not use is refused too: adding one to a compose file means adding
it here, with its type, after reading its section of the specification.
"""

from __future__ import annotations

from typing import Any

STRING: dict[str, Any] = {"type": "string"}
STRINGS: dict[str, Any] = {"type": "array", "items": STRING}
COMMAND: dict[str, Any] = {"oneOf": [STRING, STRINGS]}
DURATION: dict[str, Any] = {"type": "string", "pattern": r"^(\d+(\.\d+)?(us|ms|s|m|h))+$"}
# A mapping whose values are strings, numbers, booleans or null ("environment", "args").
MAPPING: dict[str, Any] = {
    "type": "object",
    "patternProperties": {".+": {"type": ["string", "number", "boolean", "null"]}},
    "additionalProperties": False,
}


def closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object with exactly these keys (and ``x-`` extensions, which Compose ignores)."""
    return {
        "type": "object",
        "properties": properties,
        "patternProperties": {"^x-": {}},
        "additionalProperties": False,
        "required": list(required),
    }


HEALTHCHECK = closed(
    {
        "test": COMMAND,
        "interval": DURATION,
        "timeout": DURATION,
        "start_period": DURATION,
        "start_interval": DURATION,
        "retries": {"type": "integer", "minimum": 0},
        "disable": {"type": "boolean"},
    }
)
BUILD = closed(
    {
        "context": STRING,
        "dockerfile": STRING,
        "dockerfile_inline": STRING,
        "args": MAPPING,
        "target": STRING,
    }
)
DEPENDS_ON = {
    "oneOf": [
        STRINGS,
        {
            "type": "object",
            "additionalProperties": closed(
                {
                    "condition": {
                        "enum": [
                            "service_started",
                            "service_healthy",
                            "service_completed_successfully",
                        ]
                    },
                    "restart": {"type": "boolean"},
                    "required": {"type": "boolean"},
                },
                required=("condition",),
            ),
        },
    ]
}
SERVICE = closed(
    {
        "build": {"oneOf": [STRING, BUILD]},
        "image": STRING,
        "command": COMMAND,
        "entrypoint": COMMAND,
        "environment": {"oneOf": [MAPPING, STRINGS]},
        "ports": {"type": "array", "items": {"type": ["string", "integer"]}},
        "volumes": STRINGS,
        "depends_on": DEPENDS_ON,
        "healthcheck": HEALTHCHECK,
        "restart": {"enum": ["no", "always", "on-failure", "unless-stopped"]},
        "stop_signal": STRING,
        "stop_grace_period": DURATION,
        "network_mode": STRING,
        "read_only": {"type": "boolean"},
        "tmpfs": {"oneOf": [STRING, STRINGS]},
        "cap_drop": STRINGS,
        "security_opt": STRINGS,
        "user": STRING,
    }
)
COMPOSE_FILE = closed(
    {
        "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_-]*$"},
        "include": STRINGS,
        "services": {"type": "object", "additionalProperties": SERVICE},
        "volumes": {"type": "object", "additionalProperties": {"type": ["object", "null"]}},
    }
)
