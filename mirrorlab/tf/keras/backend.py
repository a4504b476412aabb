"""``keras.backend``: ``clear_session`` (resets the automatic layer, model and optimizer names)."""

from .naming import clear_session

__all__ = ["clear_session"]
