"""Stored rows brought under today's redaction rule (``service.safetext``), for the
migrations that follow a widening of it (0010, 0012).

A server or webhook URL is stored twice: the shown form, which any answer may carry, and the
full one (``url_secret``), which only the wire reads. A row written under a narrower rule may
show a credential in clear: it is split again from the full URL, keeping a credential key
already set; the copies of URLs in events, errors and delivery attempts are redacted in place.
Runs on an Alembic connection, on either backend.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from service.safetext import redact_urls, split_secret
from service.store.catalog import secret_credential_key

MAYBE_SECRET = "({column} LIKE '%@%' OR {column} LIKE '%=%' OR {column} LIKE '%earer%'"
MAYBE_SECRET += " OR {column} LIKE '%asic%' OR {column} LIKE '%EARER%' OR {column} LIKE '%ASIC%')"
"""Rows that can hold something to redact; the rest are not read."""
REDACTED = (
    ("events", "id", "server_url"),
    ("events", "id", "data"),
    ("servers", "id", "last_error"),
    ("subscriptions", "id", "state_reason"),
    ("deliveries", "id", "last_error"),
    ("delivery_attempts", "id", "error"),
    ("delivery_attempts", "id", "response_body"),
)


def rewrite(conn: Any) -> None:
    """Every stored URL and URL copy as today's rule shows it."""
    where = MAYBE_SECRET.format(column="COALESCE(url_secret, url)")
    rows = conn.execute(
        sa.text(f"SELECT id, url, url_secret, credential_key FROM servers WHERE {where}")
    ).all()
    for row in rows:
        shown, secret = split_secret(row.url_secret or row.url)
        if shown == row.url:
            continue
        key = row.credential_key or (secret_credential_key(secret) if secret else "")
        conn.execute(
            sa.text(
                "UPDATE servers SET url = :url, url_secret = :secret, credential_key = :key "
                "WHERE id = :id"
            ),
            {"url": shown, "secret": secret, "key": key, "id": row.id},
        )
    rows = conn.execute(
        sa.text(f"SELECT id, url, url_secret FROM webhook_targets WHERE {where}")
    ).all()
    for row in rows:
        shown, secret = split_secret(row.url_secret or row.url)
        if shown != row.url:
            conn.execute(
                sa.text(
                    "UPDATE webhook_targets SET url = :url, url_secret = :secret WHERE id = :id"
                ),
                {"url": shown, "secret": secret, "id": row.id},
            )
    for table, key, column in REDACTED:
        where = MAYBE_SECRET.format(column=column)
        for row in conn.execute(sa.text(f"SELECT {key}, {column} FROM {table} WHERE {where}")):
            shown = redact_urls(row[1])
            if shown != row[1]:
                conn.execute(
                    sa.text(f"UPDATE {table} SET {column} = :value WHERE {key} = :key"),
                    {"value": shown, "key": row[0]},
                )
