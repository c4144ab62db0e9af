"""The one place the product's version lives.

The build backend reads it from here (``[tool.hatch.version]``) and every program reports
it from here, so the wheel, ``--version`` and the ``clientInfo`` we send to servers can
never disagree. Reading it through ``importlib.metadata`` instead would cost every CLI
start a scan of site-packages.
"""

__version__ = "0.1.0"
