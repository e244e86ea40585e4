"""The ingress app `create_app` builds, for tests that drive it in-process (no server, no lifespan).

Its Redis (port 9) never answers: a route that reads Redis answers as it does while Redis is
down. Its key ring is `Keyring`, which knows `KEY`.
"""

from __future__ import annotations

from types import SimpleNamespace

from fastapi import FastAPI

from turnout.config import parse_config
from turnout.settings import Settings
from turnout_ingress.app import create_app

CONFIG = """
providers:
  p: {kind: openai_compatible, base_url: "http://127.0.0.1:9/v1", api_key: k}
models:
  m: {offers: [{provider: p, model: m}]}
"""
KEY = "tk-ingress-app-0001"
"""The one gateway key `Keyring` knows."""


class Keyring:
    """A key ring that knows `KEY` once `loaded` (the identity holds only what the door reads: its org and key name)."""

    def __init__(self, *, loaded: bool = True) -> None:
        self.loaded = loaded

    def authenticate(self, token: str | None) -> object | None:
        return SimpleNamespace(org="acme", key="main") if self.loaded and token == KEY else None


def ingress_app() -> FastAPI:
    """The ingress app for `CONFIG` (model `m`), with `Keyring()` as its key ring."""
    app = create_app(parse_config(CONFIG, env={}), redis_url="redis://127.0.0.1:9", settings=Settings.from_env({}))
    app.state.turnout.keyring = Keyring()
    return app
