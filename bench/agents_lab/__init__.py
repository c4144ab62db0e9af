"""The agent lab: real agent CLIs, pinned, driven headless against a scripted model inside a
private loopback-only network namespace. See bench/agents_lab/__main__.py."""
