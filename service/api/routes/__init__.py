"""Route modules of the local API; :mod:`service.api.app` includes each router."""
