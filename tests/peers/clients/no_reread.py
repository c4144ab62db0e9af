"""A client that listens and gets the update, then leaves without reading again."""

import sys

from _raw import RawClient

client = RawClient(sys.argv[1], "lab-no-reread")
client.call("server/discover")
client.call("resources/list")
client.read()
with client.listen() as messages:
    for message in messages:
        if message.get("method") == "notifications/resources/updated":
            break
print("notified, leaving without a re-read")
