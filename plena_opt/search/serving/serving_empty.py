"""Why a serving front is empty, and what to change (issue 25: every empty result says why).

A mode's front is empty for one of three reasons, checked in this order: there is no pool to
split the cluster into (disaggregated only), no worker fits its devices' memory, or no deployment
meets the SLA. The memory reason names the lightest worker of the largest pool (weights + KV
per device against the capacity) and the smaller formats whose weights would make it fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from plena_opt.estimate.disaggregated import WorkerFigures

GIB = 2**30


def empty_reason(space: Any, mode: str, scored: int) -> str:
    """The reason (with the fix) that ``mode``'s front of ``space`` (a ``ServingSpace``) is
    empty; ``scored``: the deployments of that mode that were scored."""
    from plena_opt.search.serving.serving import sla_text

    n = space.inputs.noc.num_devices
    if mode == "disaggregated" and not space.pool_sizes:
        return (
            f"no prefill/decode pool: {space.inputs.noc.name} ({n} devices) has no smaller "
            "sub-cluster to split into; use --serving aggregated"
        )
    workers = space.aggregated if mode == "aggregated" else space.workers
    if workers and not any(w.fits is not False for w in workers):
        return _memory_reason(space, workers, mode)
    sla = sla_text(space.sla)
    return (
        f"none of the {scored} {mode} deployments scored meets the SLA ({sla}); relax "
        "--max-ttft-ms / --max-tpot-ms / --min-tps-per-seq, or try smaller --batch-sizes"
    )


def _memory_reason(space: Any, workers: Sequence[WorkerFigures], mode: str) -> str:
    """No worker fits: the lightest one of the largest pool, and the fix."""
    largest = max(w.devices for w in workers)
    pool = [w for w in workers if w.devices == largest]
    light = min(pool, key=lambda w: w.weight_bytes_per_device + w.kv_bytes_per_device)
    cap = space.inputs.memory.capacity_bytes
    fmt = light.precision or _workload_format(space)
    where = "the whole cluster" if mode == "aggregated" else f"the largest pool ({largest} devices)"
    if light.max_batch is not None and light.max_batch > 0:
        need = (
            f"holds at most {light.max_batch} sequences per worker at the memory fraction, "
            f"fewer than the smallest batch searched ({min(space.batches)})"
        )
        return f"no {mode} worker fits in memory: {where} {need}; try smaller --batch-sizes"
    used = light.weight_bytes_per_device + light.kv_bytes_per_device
    of = "" if cap is None else f" of {cap / GIB:,.1f} GiB"
    text = (
        f"the model does not fit any {mode} worker at {fmt}: {where} needs at least "
        f"{used / GIB:,.1f} GiB per device ({light.weight_bytes_per_device / GIB:,.1f} GiB "
        f"weights + {light.kv_bytes_per_device / GIB:,.1f} GiB KV){of}"
    )
    smaller = _formats_that_fit(space, light, fmt, cap)
    if smaller:
        return (f"{text}; its weights fit at {', '.join(smaller)}: try --precision "
                f"{smaller[0]} (a re-quantised checkpoint)")  # fmt: skip
    return f"{text}; use a larger cluster, a shorter context or smaller --batch-sizes"


def _bytes_table(space: Any) -> dict:
    from plena_opt.chip.gpu import GpuChipProfile
    from plena_opt.chip.precision import GPU_BYTES, PLENA_BYTES

    return GPU_BYTES if isinstance(space.inputs.chip, GpuChipProfile) else PLENA_BYTES


def _workload_format(space: Any) -> str:
    from plena_opt.chip.gpu import GpuChipProfile

    fmt = space.inputs.workload.precision
    if fmt is not None:
        return fmt
    chip = space.inputs.chip
    if not isinstance(chip, GpuChipProfile):
        return "mxfp8"
    ckpt = space.inputs.model.checkpoint_precision  # a GPU runs the checkpoint's format
    return ckpt if ckpt in chip.formats else "bf16"


def _formats_that_fit(space: Any, w: WorkerFigures, fmt: str, cap: float | None) -> list[str]:
    """Formats the chip runs whose weights (scaled by bytes per element; KV unchanged) make
    ``w`` fit, largest first (the least precision given up)."""
    table = _bytes_table(space)
    offered = getattr(space.inputs.chip, "formats", None)  # a GPU: the formats it runs
    if offered is not None:
        table = {k: v for k, v in table.items() if k in offered or k == fmt}
    if cap is None or fmt not in table:
        return []
    per = table[fmt].weight
    out = []
    for name, b in sorted(table.items(), key=lambda kv: -kv[1].weight):
        if (
            b.weight < per
            and w.weight_bytes_per_device * b.weight / per + w.kv_bytes_per_device <= cap
        ):
            out.append(name)
    return out
