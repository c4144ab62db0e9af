"""A 2026-07-28 client that forgets the Mcp-Method / Mcp-Name routing headers."""

import sys

from _raw import RawClient

client = RawClient(sys.argv[1], "lab-no-headers", headers=False)
print(client.call("server/discover").get("error", {}).get("code"))
print(client.call("resources/read", {"uri": "test://review/status"}).get("error", {}).get("code"))
