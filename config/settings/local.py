"""Embedded default: SQLite and in-process jobs unless the environment says otherwise."""

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
