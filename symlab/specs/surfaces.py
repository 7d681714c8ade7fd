"""A landscape over two coordinates, as every lab's 3-D view, its CSV and its command line's ``--surface`` share it:
a grid of values with its axes, and lines drawn on it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symlab.specs import results


@dataclass(frozen=True, eq=False)
class Line:
    """A path on the landscape (or one point: a marker), in the surface's own coordinates. ``z`` is the value the
    line is drawn at: the landscape's own along a path it follows."""

    label: str
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray


@dataclass(frozen=True, eq=False)  # one surface is one object: a view encodes each once
class Surface:
    """``z[i, j]`` is the value at ``(x[j], y[i])``: rows follow y. Titles name each axis with its unit. A view
    draws values below ``z_floor`` at the floor (a log-density falls without bound away from its mass); the grid,
    the CSV and the JSON keep them as computed."""

    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    x_title: str
    y_title: str
    z_title: str
    z_floor: float | None = None
    z_scale: str = "linear"  # or "log": heights spanning decades, a valley's floor and its walls
    lines: tuple[Line, ...] = ()

    def __post_init__(self):
        if self.z.shape != (self.y.size, self.x.size):
            raise ValueError(f"z is {self.z.shape}: a surface needs one row per y and one column per x")
        if self.z_scale not in ("linear", "log") or (self.z_scale == "log" and not (self.z_floor or 0) > 0):
            raise ValueError(f"z_scale {self.z_scale!r}: linear, or log with a positive z_floor")

    def drawn(self) -> np.ndarray:
        """``z`` as a view draws it: clipped at the floor."""
        return self.z if self.z_floor is None else np.maximum(self.z, self.z_floor)

    def columns(self) -> dict[str, np.ndarray]:
        """The grid in long form, one row per point (the CSV behind the view)."""
        xs, ys = np.meshgrid(self.x, self.y)
        return {"x": xs.ravel(), "y": ys.ravel(), "z": self.z.ravel()}


def heights(surface: Surface, x, y) -> np.ndarray:
    """The landscape's drawn value at points ``(x, y)``, interpolated bilinearly (a point outside the grid takes
    its edge's value; NaN, a break between outlines, stays NaN): where a line drawn on the surface sits."""
    x, y = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
    z = surface.drawn()
    finite = np.isfinite(x) & np.isfinite(y)
    fx = np.interp(np.where(finite, x, surface.x[0]), surface.x, np.arange(surface.x.size))
    fy = np.interp(np.where(finite, y, surface.y[0]), surface.y, np.arange(surface.y.size))
    j, i = np.minimum(fx.astype(int), surface.x.size - 2), np.minimum(fy.astype(int), surface.y.size - 2)
    tx, ty = fx - j, fy - i
    found = (1 - ty) * ((1 - tx) * z[i, j] + tx * z[i, j + 1]) + ty * ((1 - tx) * z[i + 1, j] + tx * z[i + 1, j + 1])
    return np.where(finite, found, np.nan)


LIFT = 0.015  # of the drawn height's range: a line on the landscape sits this far above it, to be seen whole


def lifted(surface: Surface, z) -> np.ndarray:
    """Heights ``z`` a little above the landscape: by :data:`LIFT` of the range it draws (of its decades, on a log
    axis), so that a line on it is seen whole."""
    drawn, z = surface.drawn(), np.asarray(z, dtype=np.float64)
    if surface.z_scale == "log":
        return z * (np.nanmax(drawn) / np.nanmin(drawn)) ** LIFT
    return z + LIFT * float(np.nanmax(drawn) - np.nanmin(drawn))


def on_surface(surface: Surface, label: str, x, y) -> Line:
    """A line through ``(x, y)`` drawn on the landscape, a little above it."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    return Line(label, x, y, lifted(surface, heights(surface, x, y)))


def to_json(surface: Surface) -> dict:
    """The JSON a command line's ``--surface`` writes: ``x``, ``y``, ``z`` (rows follow y), ``x_title``,
    ``y_title``, ``z_title``, ``z_floor``, ``z_scale`` and ``lines`` (each ``label``, ``x``, ``y``, ``z``; null where an
    outline breaks, as where z is not finite)."""
    return results.to_json(surface)


def summary(written: dict) -> str:
    """One line for a command line's table, from :func:`to_json`'s dict: the grid's size and ranges, and where it
    is lowest and highest."""
    x, y = np.asarray(written["x"], dtype=np.float64), np.asarray(written["y"], dtype=np.float64)
    z = np.array([[np.nan if v is None else v for v in row] for row in written["z"]], dtype=np.float64)
    low, high = np.unravel_index(np.nanargmin(z), z.shape), np.unravel_index(np.nanargmax(z), z.shape)
    return (
        f"{y.size} × {x.size} grid: {written['x_title']} {x[0]:.3g} to {x[-1]:.3g}, {written['y_title']} "
        f"{y[0]:.3g} to {y[-1]:.3g}; {written['z_title']}: lowest {z[low]:.4g} at ({x[low[1]]:.3g}, "
        f"{y[low[0]]:.3g}), highest {z[high]:.4g} at ({x[high[1]]:.3g}, {y[high[0]]:.3g})"
    )
