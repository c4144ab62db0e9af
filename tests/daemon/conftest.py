from tests.support.daemon import daemon_factory  # noqa: F401
from tests.webhooks.receiver import receiver  # noqa: F401
