"""Versioned duration-noise spec and its seeded sampler (pipeline-simulator §2).

``d[j,n] = base[j] · g_rank[r,n] · eps[j,n] · straggle[r,n] · moe[j,n]``. Common random numbers:
every component draws from its own PCG64 stream keyed by ``(seed, component, rank, op type,
chunk, sample block)`` via ``SeedSequence`` spawn keys, and rows inside a stream are
``step·m + mb``, so the same (rank, op type, micro-batch) slot gets the same noise in every plan
simulated with the same seed and micro-batch count (sample blocks have a fixed size,
:data:`SAMPLE_BLOCK`). The jitter's normals come from a Box–Muller transform of 53-bit uniforms
drawn in fixed chunks of stream rows (:func:`_scaled_normal_chunk`), about 2.4× cheaper here than
numpy's float32 ziggurat and still prefix-stable.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from plena_opt.errors import PlenaInputError
from plena_opt.simulator.scheduler import PipelinePlan
from plena_opt.stop import StopToken

#: Samples per random-stream block (fixed so that CRN holds across calls and plans).
SAMPLE_BLOCK = 2048
_COMPONENT = {"eps": 1, "rank": 2, "straggle": 3, "moe_pool": 4, "moe": 5}
_MOE_POOL = 4096
#: Noise rows drawn and transformed at once (64 × 2048 values: 2 MiB of scratch, about L2 size).
_ROW_CHUNK = 64


class StragglerSpec(BaseModel):
    """Per rank and step, with ``probability`` the rank runs slower by U(low, high)."""

    model_config = ConfigDict(extra="forbid")
    probability: float = Field(0.0, ge=0.0, le=1.0)
    factor_low: float = Field(1.2, ge=1.0)
    factor_high: float = Field(2.0, ge=1.0)

    @model_validator(mode="after")
    def _order(self) -> StragglerSpec:
        if self.factor_high < self.factor_low:
            raise ValueError("factor_high must be >= factor_low")
        return self


class MoeImbalanceSpec(BaseModel):
    """MoE per-step imbalance: loads ~ Multinomial(tokens·top_k, π), π ~ Dirichlet(alpha·1).

    ``fraction`` of an op's time scales with the busiest EP rank's load over the mean load;
    ``op_types`` limits it to those duration keys (default: every op).
    """

    model_config = ConfigDict(extra="forbid")
    experts: int = Field(ge=1)
    top_k: int = Field(1, ge=1)
    ep: int = Field(1, ge=1)
    tokens: int = Field(ge=1)
    alpha: float = Field(1.0, gt=0.0)
    fraction: float = Field(0.5, ge=0.0, le=1.0)
    op_types: list[str] | None = None

    @model_validator(mode="after")
    def _shape(self) -> MoeImbalanceSpec:
        if self.top_k > self.experts:
            raise ValueError("top_k must be <= experts")
        if self.experts % self.ep:
            raise ValueError("ep must divide experts")
        return self


class NoiseSpec(BaseModel):
    """Noise model, version 1: lognormal mean-1 jitter (``jitter_sigma`` = σ of log ε), a
    persistent per-rank lognormal speed factor (``rank_sigma``), stragglers and MoE imbalance."""

    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    jitter_sigma: float = Field(0.0, ge=0.0, le=2.0)
    rank_sigma: float = Field(0.0, ge=0.0, le=2.0)
    straggler: StragglerSpec | None = None
    moe: MoeImbalanceSpec | None = None


_ALIASES = {
    "sigma": "jitter_sigma",
    "jitter": "jitter_sigma",
    "rank": "rank_sigma",
    "straggler_p": ("straggler", "probability"),
    "straggler_low": ("straggler", "factor_low"),
    "straggler_high": ("straggler", "factor_high"),
}


def _from_text(text: str) -> dict[str, Any]:
    """``sigma=0.05,rank=0.03,straggler_p=0.01`` (or ``moe_experts=…`` etc.) → dict."""
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise PlenaInputError("noise", f"noise item {part!r} must look like key=value")
        key, value = (s.strip() for s in part.split("=", 1))
        target = _ALIASES.get(key, key)
        if key.startswith("moe_"):
            target = ("moe", key[4:])
        if key.startswith("straggler_") and key not in _ALIASES:
            target = ("straggler", key[10:])
        if isinstance(target, tuple):
            out.setdefault(target[0], {})[target[1]] = value
        else:
            out[target] = value
    return out


def parse_noise(value: NoiseSpec | Mapping[str, Any] | str | None) -> NoiseSpec:
    """Validate a noise spec (model, dict or ``key=value,…`` text); errors name the field."""
    if isinstance(value, NoiseSpec):
        return value
    if value is None:
        return NoiseSpec()
    data = _from_text(value) if isinstance(value, str) else dict(value)
    try:
        return NoiseSpec.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        field = "noise" + (f".{loc}" if loc else "")
        raise PlenaInputError(field, f"{field}: {err['msg']}") from None


def _stream(seed: int, *key: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=key)))


def _type_key(op_type: str) -> int:
    return zlib.crc32(op_type.encode())


def moe_imbalance_pool(spec: MoeImbalanceSpec, seed: int) -> np.ndarray:
    """``_MOE_POOL`` draws of max-over-EP-ranks load / mean load (≥ 1), resampled per op."""
    rng = _stream(seed, _COMPONENT["moe_pool"])
    pi = rng.dirichlet(np.full(spec.experts, spec.alpha), size=_MOE_POOL)
    loads = rng.multinomial(spec.tokens * spec.top_k, pi)
    per_rank = loads.reshape(_MOE_POOL, spec.ep, -1).sum(axis=2)
    mean = spec.tokens * spec.top_k / spec.ep
    return (per_rank.max(axis=1) / mean).astype(np.float32)


class NoiseSampler:
    """Draws the multiplicative factor matrix ``[n_ops, n]`` of one sample block."""

    def __init__(self, plan: PipelinePlan, spec: NoiseSpec, seed: int) -> None:
        self.plan, self.spec, self.seed = plan, spec, int(seed)
        self.rank_of = np.array([o.rank for o in plan.ops], dtype=np.int64)
        m = max(plan.microbatches, 1)
        rows = np.array([max(o.step, 0) * m + o.microbatch for o in plan.ops], dtype=np.int64)
        groups: dict[tuple[int, int, int], list[int]] = {}
        for o in plan.ops:
            groups.setdefault((o.rank, _type_key(o.op_type), o.chunk), []).append(o.id)
        self.groups = []
        for key, v in groups.items():
            ids = np.array(v)[np.argsort(rows[v], kind="stable")]  # by stream row
            self.groups.append((key, ids, rows[ids]))
        self.pool = moe_imbalance_pool(spec.moe, self.seed) if spec.moe else None
        if spec.moe and spec.moe.op_types is not None:
            wanted = set(spec.moe.op_types)
            self.moe_mask = np.array([o.op_type in wanted for o in plan.ops])
        else:
            self.moe_mask = np.ones(plan.n_ops, dtype=bool)

    def factors(self, block: int, n: int) -> np.ndarray:
        """Factors for samples ``[block·SAMPLE_BLOCK, block·SAMPLE_BLOCK + n)`` (float32)."""
        return self.durations(block, n, np.ones(self.plan.n_ops))

    def durations(
        self,
        block: int,
        n: int,
        base: np.ndarray,
        out: np.ndarray | None = None,
        row_of: np.ndarray | None = None,
        stop: StopToken | None = None,
        first: int = 0,
    ) -> np.ndarray:
        """``base[j] ·`` factors of samples ``[first, first + n)`` of the block (float32), op
        ``j`` written to row ``row_of[j]`` of ``out`` (default: row ``j`` of a new ``[n_ops, n]``
        array). The streams are drawn whole whatever the column range, so a sample's factors do
        not depend on ``first``/``n`` (a block can be simulated in column slices). ``stop`` is
        checked for every (rank, op type, chunk) stream (raises :class:`~plena_opt.stop.Stopped`).
        """
        if not 0 <= first and first + n <= SAMPLE_BLOCK:
            raise ValueError(f"samples [{first}, {first + n}) are outside a block")
        if out is None:
            out = np.empty((self.plan.n_ops, n), dtype=np.float32)
        per_rank = self._per_rank(block, n, first)
        s = np.float32(self.spec.jitter_sigma)
        log_rank = None
        if s > 0 and per_rank is not None:
            log_rank = np.log(per_rank)
        for (rank, tkey, chunk), ids, rows in self.groups:
            if stop is not None:
                stop.check()
            dest = ids if row_of is None else row_of[ids]
            b = base[ids].astype(np.float32)[:, None]
            if s > 0:
                rng = _stream(self.seed, _COMPONENT["eps"], rank, tkey, chunk, block)
                with np.errstate(divide="ignore"):
                    log_b = np.log(b) - s * s / 2
                row_shift = None if log_rank is None else log_rank[rank]
                _lognormal_rows(rng, rows, s, log_b, row_shift, out, dest, first)
            elif per_rank is not None:
                out[dest] = b * per_rank[rank]
            else:
                out[dest] = b
            if self.pool is not None:
                self._moe(out, dest, block, (first, first + n), rank, tkey, chunk, ids, rows)
        return out

    def _per_rank(self, block: int, n: int, first: int = 0) -> np.ndarray | None:
        spec, p = self.spec, self.plan.pp_size
        st = spec.straggler
        strag = st is not None and st.probability > 0
        if spec.rank_sigma == 0 and not strag:
            return None
        per_rank = np.ones((p, n), dtype=np.float32)
        if spec.rank_sigma > 0:
            s = np.float32(spec.rank_sigma)
            z = _stream(self.seed, _COMPONENT["rank"], block).standard_normal(
                (p, SAMPLE_BLOCK), dtype=np.float32
            )[:, first : first + n]
            per_rank *= np.exp(s * z - s * s / 2)
        if strag:
            rng = _stream(self.seed, _COMPONENT["straggle"], block)
            cols = slice(first, first + n)
            hit = rng.random((p, SAMPLE_BLOCK))[:, cols] < st.probability
            fac = rng.uniform(st.factor_low, st.factor_high, (p, SAMPLE_BLOCK))[:, cols]
            per_rank *= np.where(hit, fac, 1.0).astype(np.float32)
        return per_rank

    def _moe(self, out, dest, block, cols, rank, tkey, chunk, ids, rows) -> None:
        """Scale the MoE share of each op's duration by the pooled busiest-rank imbalance."""
        mask = self.moe_mask[ids]
        if not mask.any():
            return
        f = np.float32(self.spec.moe.fraction)
        rng = _stream(self.seed, _COMPONENT["moe"], rank, tkey, chunk, block)
        pick = rng.integers(0, len(self.pool), (int(rows.max()) + 1, SAMPLE_BLOCK))
        imb = self.pool[pick[rows[mask], cols[0] : cols[1]]]
        out[dest[mask]] *= 1 - f + f * imb


def _lognormal_rows(
    rng: np.random.Generator,
    rows: np.ndarray,
    s: np.float32,
    log_b: np.ndarray,
    row_shift: np.ndarray | None,
    out: np.ndarray,
    dest: np.ndarray,
    first: int = 0,
) -> None:
    """``out[dest[i]] = exp(s·z[rows[i]] + log_b[i] + row_shift)`` for standard normal stream rows
    ``z`` of ``SAMPLE_BLOCK`` values (``rows`` ascending; only samples ``[first, first +
    out.shape[1])`` are kept, and only they are transformed). Rows are drawn and transformed in
    chunks of :data:`_ROW_CHUNK` so that the work stays in cache."""
    n = out.shape[1]
    z = np.empty((_ROW_CHUNK, n), dtype=np.float32)
    u = np.empty((_ROW_CHUNK, SAMPLE_BLOCK), dtype=np.float64)
    w = np.empty((_ROW_CHUNK, n), dtype=np.float32)
    n_draw = int(rows[-1]) + 1
    dense = len(rows) == n_draw and rows[0] == 0 and np.all(np.diff(rows) == 1)
    for row0 in range(0, n_draw, _ROW_CHUNK):
        c = min(_ROW_CHUNK, n_draw - row0)
        _scaled_normal_chunk(rng, s, z, u, w, first, c)
        lo, hi = np.searchsorted(rows, (row0, row0 + c))
        if lo == hi:
            continue
        if dense:  # every stream row of the chunk is used, in order
            g = z[:c]
        else:
            g = z[rows[lo:hi] - row0]
        g += log_b[lo:hi]
        if row_shift is not None:
            g += row_shift
        np.exp(g, out=g)
        out[dest[lo:hi]] = g


def _scaled_normal_chunk(
    rng: np.random.Generator,
    scale: np.float32,
    out: np.ndarray,
    u: np.ndarray,
    w: np.ndarray,
    first: int = 0,
    used: int = _ROW_CHUNK,
) -> None:
    """``out`` (``[_ROW_CHUNK, n]`` float32) ← ``scale ·`` independent standard normals of samples
    ``[first, first + n)`` for the next :data:`_ROW_CHUNK` stream rows (all ``SAMPLE_BLOCK``
    uniforms of each row are drawn into ``u``; only the kept columns are transformed). When only
    the first ``used ≤ _ROW_CHUNK/2`` rows are wanted (the stream's last chunk), only their
    radius and angle rows are drawn (the rows between are skipped with ``advance``, the same
    values) and ``out[used:]`` is left unset.

    Box–Muller transform, ``z = √(−2 ln v)·(cos 2πa, sin 2πa)`` for uniforms ``v ∈ (0, 1]`` and
    ``a``: the float64 uniforms (53-bit, so radii are exact out to 8.6 σ) of the first half of the
    rows give the radii, those of the second half the angles, and row ``i`` and row
    ``i + _ROW_CHUNK/2`` share a pair (cos and sin). Chunks start at stream row 0 and are always
    drawn whole, so a row's values do not depend on how many rows a plan uses (prefix-stable).
    Arithmetic after the uniforms is float32 on contiguous halves (about 3.5 ns a value here
    against 8.5 ns for numpy's float32 ziggurat). ``u`` (float64, ``[_ROW_CHUNK, SAMPLE_BLOCK]``)
    and ``w`` (float32, ``out``'s shape) are scratch buffers.
    """
    h = _ROW_CHUNK // 2
    if used <= h:
        _scaled_normal_rows(rng, scale, out, u, w, first, used)
        return
    rng.random(out=u)
    cols = u[:, first : first + out.shape[1]]
    np.subtract(1.0, cols[:h], out=cols[:h])  # (0, 1]: the log stays finite
    w[...] = cols
    radius, angle = w[:h], w[h:]
    np.log(radius, out=radius)
    radius *= np.float32(-2.0) * scale * scale
    np.sqrt(radius, out=radius)  # scale · √(−2 ln v)
    angle *= np.float32(2.0 * np.pi)
    np.cos(angle, out=out[:h])
    np.sin(angle, out=out[h:])
    out[:h] *= radius
    out[h:] *= radius


def _scaled_normal_rows(
    rng: np.random.Generator,
    scale: np.float32,
    out: np.ndarray,
    u: np.ndarray,
    w: np.ndarray,
    first: int,
    used: int,
) -> None:
    """:func:`_scaled_normal_chunk` for the first ``used ≤ _ROW_CHUNK/2`` rows only: their
    radius rows ``[0, used)`` and angle rows ``[h, h + used)`` of the chunk (cosine partners)."""
    h = _ROW_CHUNK // 2
    rng.random(out=u[:used])
    rng.bit_generator.advance((h - used) * SAMPLE_BLOCK)
    rng.random(out=u[h : h + used])
    cols = slice(first, first + out.shape[1])
    np.subtract(1.0, u[:used, cols], out=u[:used, cols])
    w[:used] = u[:used, cols]
    w[h : h + used] = u[h : h + used, cols]
    radius, angle = w[:used], w[h : h + used]
    np.log(radius, out=radius)
    radius *= np.float32(-2.0) * scale * scale
    np.sqrt(radius, out=radius)
    angle *= np.float32(2.0 * np.pi)
    np.cos(angle, out=out[:used])
    out[:used] *= radius
