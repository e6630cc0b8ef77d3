"""What any threshold may be: finite and not negative (the health checks' and the diagnosis's alike)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator


class Bounds(BaseModel):
    """Thresholds of any kind: finite, and none negative."""

    model_config = ConfigDict(allow_inf_nan=False)  # a NaN threshold would silently never fire

    @field_validator("*")
    @classmethod
    def _not_negative(cls, value: Any) -> Any:
        """Every threshold is a count, a ratio, a size or a duration: none is negative."""
        if isinstance(value, int | float) and value < 0:
            raise ValueError("must not be negative")
        return value
