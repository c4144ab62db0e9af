"""The HTTP transports under the MCP client, the links and the webhook dispatcher: the seam
(:mod:`.base`), its implementations (:mod:`.lean`, :mod:`.viahttpx`, :mod:`.memory` for unit
tests) and the one place a URL's transport is chosen (:mod:`.choose`)."""
