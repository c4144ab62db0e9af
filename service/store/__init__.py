"""The daemon's persistent state (SQLAlchemy 2 async; SQLite WAL by default)."""

from service.store.records import Event, Revision, Server, Subscription
from service.store.store import Store, content_hash, sqlite_url

__all__ = ["Event", "Revision", "Server", "Store", "Subscription", "content_hash", "sqlite_url"]
