"""A problem with its peak figures scaled (issue 30 item 4: the robust front).

``derate(inputs, factor)`` returns a copy of ``inputs`` whose GPU chip runs every compute format at
``factor`` × its peak FLOP/s, whose HBM (the chip's and the fixed-bandwidth memory priced from it)
moves ``factor`` × its bandwidth, and whose network links, switch centres and NICs carry
``factor`` × their bandwidth (measured collective times ÷ ``factor``). The shipped profiles and
constants are untouched: this is a scaling option of the evaluator's inputs. A robust plan meets
its SLA at ``factor = ROBUST_PEAK_FACTOR``. Only GPU chips: a PLENA chip's peak follows from its
clock and array sizes, which this does not scale (refused naming ``chip``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.estimate.problem import EvaluatorInputs

#: The robust front's peaks: 10 % below the datasheet (issue 30 item 4, "±10 % on the chip's
#: peak figures"; the pessimistic side is the one an SLA can miss on). An assumption, not a fit.
ROBUST_PEAK_FACTOR = 0.9


def derate(inputs: EvaluatorInputs, factor: float) -> EvaluatorInputs:
    """``inputs`` with compute, memory-bandwidth and network peaks × ``factor`` (0 < f ≤ 2)."""
    from plena_opt.chip.gpu import GpuChipProfile
    from plena_opt.estimate.memo import PricingMemo

    if not 0 < factor <= 2:
        raise PlenaInputError("peak_factor", f"peak factor must be in (0, 2], got {factor!r}")
    chip = inputs.chip
    if not isinstance(chip, GpuChipProfile):
        raise PlenaInputError(
            "chip",
            "peak scaling (--robust) is modelled for GPU chip profiles only; a PLENA chip's "
            "peak follows from its clock and array sizes",
        )
    return replace(
        inputs,
        chip=_chip(chip, factor),
        memory=_memory(inputs.memory, factor),
        noc=None if inputs.noc is None else _noc(inputs.noc, factor),
        memo=PricingMemo(),
    )


def _scaled(s: Any, factor: float) -> Any:
    return s.model_copy(update={"value": s.value * factor})


def _chip(chip: Any, factor: float) -> Any:
    peaks = {k: _scaled(v, factor) for k, v in chip.peak_flops.items()}
    hbm = chip.hbm.model_copy(
        update={"bandwidth_bytes_per_s": _scaled(chip.hbm.bandwidth_bytes_per_s, factor)}
    )
    return chip.model_copy(update={"peak_flops": peaks, "hbm": hbm})


def _memory(memory: Any, factor: float) -> Any:
    from plena_opt.memory.fixed_bandwidth import FixedBandwidthMemory

    if not isinstance(memory, FixedBandwidthMemory):
        raise PlenaInputError(
            "memory", "peak scaling (--robust) needs the GPU's own fixed-bandwidth HBM"
        )
    return FixedBandwidthMemory(
        memory.bandwidth_bytes_per_s * factor,
        memory.capacity_bytes,
        memory.transaction_bytes,
        memory.energy,
        name=memory.name,
        provenance=dict(memory.provenance),
    )


def _noc(noc: Any, factor: float) -> Any:
    levels = tuple(
        replace(
            lv,
            link_bandwidth_bps=lv.link_bandwidth_bps * factor,
            centre_in_bps=None if lv.centre_in_bps is None else lv.centre_in_bps * factor,
            centre_out_bps=None if lv.centre_out_bps is None else lv.centre_out_bps * factor,
        )
        for lv in noc.levels
    )
    nic = None if noc.nic_bandwidth_bps is None else noc.nic_bandwidth_bps * factor
    ar = noc.measured_allreduce
    if ar is not None:
        ar = replace(ar, tables=tuple(_slower(t, factor) for t in ar.tables))
    mc = noc.measured_collectives
    if mc is not None:
        ops = tuple((op, tuple(_slower(t, factor) for t in ts)) for op, ts in mc.ops)
        mc = replace(mc, ops=ops)
    return replace(
        noc,
        name=f"{noc.name}-x{factor:g}",
        levels=levels,
        nic_bandwidth_bps=nic,
        measured_allreduce=ar,
        measured_collectives=mc,
    )


def _slower(table: Any, factor: float) -> Any:
    return replace(table, seconds=tuple(s / factor for s in table.seconds))
