from tests.support.daemon import daemon_factory  # noqa: F401
