"""A client that polls: reads the resource in a loop and never listens (a named mistake)."""

import sys
import time

from _raw import RawClient

client = RawClient(sys.argv[1], "lab-poller")
client.call("server/discover")
client.call("resources/list")
for _ in range(4):
    client.read()
    time.sleep(0.05)  # the client's own polling interval
print("polled 4 times")
