"""TF's ``tf.experimental.Optional``: what ``get_next_as_optional`` returns, for datasets and distributed datasets."""

from __future__ import annotations

from typing import Any

import numpy as np

from ... import errors

__all__ = ["Optional"]


class Optional:
    """TF's ``tf.experimental.Optional``: a value that may be absent."""

    def __init__(self, value: Any, element_spec: Any, present: bool = True) -> None:
        self._value = value
        self._present = present
        self.element_spec = element_spec

    def has_value(self) -> np.bool_:
        """Whether there is a value (a scalar bool, as TF's boolean tensor)."""
        return np.bool_(self._present)

    def get_value(self) -> Any:
        """The value; TF's InvalidArgumentError when there is none."""
        if not self._present:
            raise errors.InvalidArgumentError("The given optional does not have a value. [Op:OptionalGetValue] name: "
                                              "\nFix: check `has_value()` before `get_value()`.")
        return self._value
