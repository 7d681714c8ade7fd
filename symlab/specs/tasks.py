"""What a lab declares of a computation a page waits for: a :class:`Task` (a function and its arguments under
a key naming the result), its :class:`Cost` (the arithmetic it cannot do without), and the :class:`Progress`
it reports. The server's pool (:mod:`symlab.serving.shared_results`) runs them."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """How far a computation is: ``done`` of ``total``, in words, and what a page may draw of it."""

    done: float = 0.0
    total: float = 1.0
    text: str = ""
    payload: object = None

    @property
    def fraction(self) -> float:
        return min(max(self.done / self.total, 0.0), 1.0) if self.total else 0.0


@dataclass(frozen=True)
class Cost:
    """The arithmetic a computation cannot do without: floating-point operations of its matrix products
    (a multiply-add counts two), elements its other array operations must read or write at least once, and
    standard normal draws. Its floor in seconds is that work at the rates this machine reaches
    (:class:`Rates`); a task's measured time against it is its efficiency."""

    matmul_flops: float = 0.0
    elementwise: float = 0.0
    normals: float = 0.0

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            self.matmul_flops + other.matmul_flops, self.elementwise + other.elementwise, self.normals + other.normals
        )

    def __mul__(self, times: float) -> Cost:
        return Cost(self.matmul_flops * times, self.elementwise * times, self.normals * times)

    def floor_seconds(self, rates: Rates) -> float:
        return (
            self.matmul_flops / rates.matmul_flops + self.elementwise / rates.elementwise + self.normals / rates.normals
        )


@dataclass(frozen=True)
class Rates:
    """What one core of this machine does per second, on one thread: matrix-product flops (float32,
    the better of torch's and numpy's libraries at the labs' sizes), array elements through a simple
    operation (float32, out of cache), and standard normal draws (torch's generator)."""

    matmul_flops: float
    elementwise: float
    normals: float

    def in_units(self) -> dict[str, float]:
        """As the benchmarks report them: GFLOP/s, G elements/s, M draws/s."""
        return dict(
            matmul_gflops=self.matmul_flops / 1e9,
            elements_g_per_s=self.elementwise / 1e9,
            normals_m_per_s=self.normals / 1e6,
        )

    def described(self) -> str:
        """The line the benchmarks print before their ratios."""
        units = self.in_units()
        return (
            f"machine, one thread: {units['matmul_gflops']:.0f} GFLOP/s in products, "
            f"{units['elements_g_per_s']:.2f} G elements/s, {units['normals_m_per_s']:.0f} M normal draws/s"
        )


@dataclass(frozen=True)
class Task:
    """``function(*args, progress=report)`` under a key naming its result. ``function`` must be a
    module-level function of ``symlab`` (workers import it by name); ``report(done, total, text="",
    payload=None)`` tells the waiting pages how far it is. ``cost``: its arithmetic, for the estimate
    of a wait (and the benchmarks' floors)."""

    key: Hashable
    function: Callable
    args: tuple = ()
    label: str = "Computing"
    cost: Cost | None = None


def kind_of(key: Hashable) -> Hashable:
    """What a result is (its key's first item): capacities and shipped results go by it."""
    return key[0] if isinstance(key, tuple) and key else key


# In a compute process, the shared store's lookup (installed by symlab.serving.shared_results): a task may read
# a result another task stored (a pair trained once, read by each of its maps). Elsewhere, nothing is stored.
_stored_result_lookup: Callable[[Hashable], object] = lambda key: None


def stored_result(key: Hashable):
    """``key``'s result from the shared result store when this runs in a compute process, else None."""
    return _stored_result_lookup(key)


def read_stored_results_with(lookup: Callable[[Hashable], object]) -> None:
    """Make :func:`stored_result` read through ``lookup`` (the compute process's result store)."""
    global _stored_result_lookup
    _stored_result_lookup = lookup


# The slowest machine the latency targets hold on (docs/hosting.md): 66 GFLOP/s, 3.0 G elements/s, 138 M draws/s.
SLOWEST_MACHINE = Rates(matmul_flops=66e9, elementwise=3.0e9, normals=138e6)
