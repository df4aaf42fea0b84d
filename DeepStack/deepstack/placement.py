"""Parallel schemes and rank groups (network-model.md §2).

Rank ids come from the dimension order innermost → outermost ``tp, ep, sp, cp, dp, pp``; the rank
id is the device id, so TP groups fill an L1 instance first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .errors import ProfileError, ProfileTypeError

DIMS = ("tp", "ep", "sp", "cp", "dp", "pp")


@dataclass(frozen=True)
class ParallelScheme:
    """Degrees of tensor, expert, sequence, context, data and pipeline parallelism.

    ``ep1`` / ``ep2`` record DeepStack's split of EP into batch × sequence shards (§11.1); they do
    not change rank placement.
    """

    tp: int = 1
    ep: int = 1
    sp: int = 1
    cp: int = 1
    dp: int = 1
    pp: int = 1
    ep1: int | None = None
    ep2: int | None = 1

    def __post_init__(self) -> None:
        for name in DIMS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | np.integer):
                raise ProfileTypeError(name, f"{name} must be an integer")
            if value < 1:
                raise ProfileError(name, f"{name} must be greater than zero")
            object.__setattr__(self, name, int(value))

    @property
    def world_size(self) -> int:
        """dp·pp·tp·cp·sp·ep devices."""
        return self.tp * self.ep * self.sp * self.cp * self.dp * self.pp

    def size(self, dim: str) -> int:
        """Group size of dimension ``dim``."""
        return getattr(self, check_dim(dim))

    def sizes(self) -> tuple[int, int, int, int, int, int]:
        """(tp, ep, sp, cp, dp, pp)."""
        return (self.tp, self.ep, self.sp, self.cp, self.dp, self.pp)


def check_dim(dim: str) -> str:
    """Validate a dimension name (``tp|ep|sp|cp|dp|pp``) and return it lower-cased."""
    if dim in DIMS:  # the usual case: already a lower-case name
        return dim
    d = str(dim).lower()
    if d not in DIMS:
        raise ProfileError("dim", f"dim must be one of {', '.join(DIMS)}; got {dim!r}")
    return d


@lru_cache(maxsize=4096)
def _groups(sizes: tuple[int, ...], index: int) -> np.ndarray:
    g = sizes[index]
    stride = math.prod(sizes[:index])
    outer = math.prod(sizes[index + 1 :])
    off = np.arange(stride).repeat(outer)
    ob = np.tile(np.arange(outer), stride)
    start = ob * (g * stride) + off
    out = start[:, None] + np.arange(g)[None, :] * stride
    out.setflags(write=False)
    return out


def groups(scheme: ParallelScheme, dim: str) -> np.ndarray:
    """Rank groups of ``dim`` as an int array [n_groups, group_size], in the §2 enumeration order
    (offset in the stride outer loop, outer block inner loop)."""
    return _groups(scheme.sizes(), DIMS.index(check_dim(dim)))


def layout(scheme: ParallelScheme, dim: str) -> tuple[int, int, int]:
    """(group size, stride, blocks) of ``dim``'s groups, a key equal for two (scheme, dim) exactly
    when their ``groups`` arrays are equal: a group of size ≥ 2 starts 0, stride, …; groups of
    one device list the devices in order when stride or blocks is 1, else transposed."""
    sizes = scheme.sizes()
    index = DIMS.index(check_dim(dim))
    stride = math.prod(sizes[:index])
    blocks = math.prod(sizes[index + 1 :])
    if sizes[index] == 1 and (stride == 1 or blocks == 1):
        return 1, 1, stride * blocks
    return sizes[index], stride, blocks


def groups_below(key: tuple[int, int, int], devices: int) -> np.ndarray:
    """The groups (rows of ``groups``) of the layout ``key`` that lie in devices [0, devices),
    a multiple of size · stride devices (the layout repeats every size · stride devices)."""
    size, stride, _ = key
    return _groups((stride, size, devices // (size * stride)), 1)
