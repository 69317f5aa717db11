"""The read-only declaration every non-`@tool` tool kind exposes for `ToolLike`."""

from __future__ import annotations

from ._execution import ReturnBehavior
from ._request import ToolSpecification

__all__ = ["ConfiguredTool", "SpecifiedTool"]


class SpecifiedTool:
    """`name`, `description` and `specification`, from the `_specification` a subclass sets."""

    _specification: ToolSpecification

    @property
    def name(self) -> str:
        """The tool's name, as the model calls it."""
        return self._specification.name

    @property
    def description(self) -> str:
        """The tool's description, as offered to the model."""
        return self._specification.description

    @property
    def specification(self) -> ToolSpecification:
        """The declaration offered to the model."""
        return self._specification


class ConfiguredTool(SpecifiedTool):
    """A `SpecifiedTool` that also holds its own loop options."""

    _return_behavior: ReturnBehavior
    _max_retries: int
    _sequential: bool

    @property
    def return_behavior(self) -> ReturnBehavior:
        """What the loop does with this tool's result."""
        return self._return_behavior

    @property
    def max_retries(self) -> int:
        """How many invalid-arguments attempts the loop tolerates before raising."""
        return self._max_retries

    @property
    def sequential(self) -> bool:
        """Whether this tool must not run concurrently with the other calls of its round."""
        return self._sequential
