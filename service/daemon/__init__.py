"""mcpsubd: the long-running subscription daemon."""
