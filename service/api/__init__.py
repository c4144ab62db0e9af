"""The daemon's REST API (``/v1``): routes over the application layer (``service/app``)."""

from service.api.app import create_api

__all__ = ["create_api"]
