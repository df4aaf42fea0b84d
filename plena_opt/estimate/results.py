"""Typed results of the evaluator: the reference documents of an estimate.

``DistributedEstimate`` is one plan's result (``estimate --json``); ``ReportDict`` wraps the other
reference documents (single chip) so their fields read as attributes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class ReportDict:
    """A reference JSON result; fields read as attributes, ``to_dict()`` returns the document."""

    data: dict = field(repr=False)

    def to_dict(self) -> dict:
        return self.data

    def __getattr__(self, name: str):
        try:
            return self.data[name]
        except KeyError:
            raise AttributeError(name) from None


@dataclass(frozen=True)
class DistributedEstimate:
    """The reference result of one plan; ``to_dict()`` is the ``estimate --json`` document.

    SI units: seconds, tokens/s, Hz, bytes, pJ. ``model``/``plan``/``noc``/``memory``/
    ``precision`` are the describe documents of the inputs; ``prefill`` and
    ``first_token_decode`` the per-stage reports of the two passes; ``moe`` the MoE load report
    (None for dense models); ``routing`` the MoE token routing (None for dense models);
    ``chip`` (GPU chips only) the chip, its formats and board power.
    """

    model: dict[str, Any]
    plan: dict[str, Any]
    noc: dict[str, Any]
    memory: dict[str, Any]
    precision: dict[str, Any]
    batch_size: int
    micro_batch: int
    sequences_per_device: int
    input_seq_len: int
    output_seq_len: int
    overlap_policy: str
    comm_overlap: str
    routing: str | None
    include_lm_head: bool
    compute_frequency_hz: float
    ttft_seconds: float
    tps: float
    tps_per_sequence: float
    prefill: dict[str, Any]
    first_token_decode: dict[str, Any]
    decode_seconds: float
    weight_bytes_per_device: float
    kv_cache_bytes_per_device: float
    memory_capacity_bytes: float | None
    fits_in_memory: bool | None
    moe: dict[str, Any] | None
    noc_energy_pj_per_decode_token: float | None
    warnings: list[str]
    chip: dict[str, Any] | None = None  # GPU chips only: name, formats, board power

    def to_dict(self) -> dict[str, Any]:
        """The document (field order; the values themselves, not copies). ``chip`` appears only
        for a GPU chip, so PLENA documents keep the reference shape."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if out["chip"] is None:
            del out["chip"]
        return out
