"""NoC profiles: the ``noc_hierarchy`` JSON schema, validation and ``describe()``
(loading a profile by name or path: ``profile_load``).

Spec: network-model.md §1.2 (schema), §1.3 (example profiles), §6 (energy coefficients).
Units in JSON: ns per hop and decimal GB/s; in memory: seconds and bytes/s
(``hop_latency_ns·1e-9``, ``GB/s·1e9``). Error wording follows ../shared/golden/invalid_plans.json.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .errors import ProfileError, ProfileTypeError
from .measured import MeasuredAllReduce, parse_measured_allreduce
from .measured_ops import MeasuredCollectives, parse_measured_collectives
from .topology import KINDS, Level

LEVEL_NAMES = ("L3", "L2", "L1")  # outer → inner (§1.1)
_TOP_REQUIRED = ("schema_version", "kind", "name", "layers")
_TOP_OPTIONAL = (
    "provenance",
    "port_spread",
    "energy_pj_per_bit",
    "measured_allreduce",
    "measured_collectives",
    "nic_gbytes_per_s",
)
_LEVEL_REQUIRED = ("kind", "shape", "hop_latency_ns", "link_bandwidth_gbytes_per_s")
NIC_KEY = "nic_gbytes_per_s"  # per-device NIC bandwidth, decimal GB/s (NocProfile)
_CENTRE_KEYS = ("switch_center_in_gbytes_per_s", "switch_center_out_gbytes_per_s")
# Plausible physical ranges (bounds of what the model is meant for, not measured values): a link
# from 1 MB/s to 1 PB/s (a switch centre up to 1,000× that, the aggregate of many ports), a hop
# latency of exactly 0 (a level that costs nothing) or from 1 ps to 1 s. Outside them a value is
# a typo or a denormal, and would print inf or 0 times.
BANDWIDTH_GBS_RANGE = (1e-3, 1e6)
CENTRE_GBS_RANGE = (1e-3, 1e9)
HOP_LATENCY_NS_RANGE = (1e-3, 1e9)


@dataclass(frozen=True)
class EnergyConfig:
    """Link energy per bit (pJ/bit) of L1, L2 and L3 links (§6)."""

    l1: float
    l2: float
    l3: float

    def for_level(self, index: int) -> float:
        """pJ/bit of hierarchy level ``index`` (0 = L3, 1 = L2, 2 = L1)."""
        return (self.l3, self.l2, self.l1)[index]


@dataclass(frozen=True)
class NocProfile:
    """A validated three-level NoC: ``levels`` = (L3, L2, L1), outer to inner.

    ``measured_allreduce``: all-reduce times measured inside one L1 switch, used for the groups
    they match (``deepstack.measured``); None prices every collective from the links.
    ``measured_collectives``: the same for all-gather, reduce-scatter and all-to-all
    (``deepstack.measured_ops``).
    ``nic_bandwidth_bps``: per-device NIC (bytes/s, all-switch profiles only): a flow between
    devices of different L1 switches also loads its source's NIC-out and its destination's NIC-in
    link (one NIC per device, rail-optimised fabric; ``deepstack.switch_loads``); None: no NICs."""

    name: str
    levels: tuple[Level, Level, Level]
    energy: EnergyConfig | None = None
    provenance: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    port_spread: str = "even"
    measured_allreduce: MeasuredAllReduce | None = None
    measured_collectives: MeasuredCollectives | None = None
    nic_bandwidth_bps: float | None = None

    def __post_init__(self) -> None:
        if self.nic_bandwidth_bps is not None and not self.all_switch:
            raise ProfileError(NIC_KEY, "per-device NIC links need a profile of switch levels")

    @property
    def num_devices(self) -> int:
        """Product of all level sizes (§1.1)."""
        return math.prod(level.size for level in self.levels)

    @property
    def all_switch(self) -> bool:
        """True when every level is a switch (the switch-only link graph of §4.2 applies)."""
        return all(level.kind == "switch" for level in self.levels)

    def describe(self) -> dict[str, Any]:
        """Summary in the reference ``describe`` shape (golden ``noc`` field): ns and GB/s; a
        profile with a measured all-reduce adds its source and measured group sizes."""
        out = self._describe()
        if self.measured_allreduce is not None:
            out["measured_allreduce"] = {
                "source": self.measured_allreduce.source,
                "devices": [t.devices for t in self.measured_allreduce.tables],
            }
        if self.measured_collectives is not None:
            out["measured_collectives"] = self.measured_collectives.describe()
        if self.nic_bandwidth_bps is not None:
            out[NIC_KEY] = self.nic_bandwidth_bps / 1e9
        return out

    def _describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "num_devices": self.num_devices,
            "layers": [
                {
                    "level": lname,
                    "kind": level.kind,
                    "shape": [level.rows, level.cols],
                    "hop_latency_ns": level.hop_latency_s * 1e9,
                    "link_bandwidth_gbytes_per_s": level.link_bandwidth_bps / 1e9,
                }
                for lname, level in zip(LEVEL_NAMES, self.levels, strict=True)
            ],
            "energy_pj_per_bit": None
            if self.energy is None
            else {"l1": self.energy.l1, "l2": self.energy.l2, "l3": self.energy.l3},
            "provenance": dict(self.provenance),
        }

    def to_dict(self) -> dict[str, Any]:
        """The profile as ``noc_hierarchy`` JSON (ns, GB/s); ``load_noc_profile`` round-trips it."""
        layers: dict[str, Any] = {}
        for lname, level in zip(LEVEL_NAMES, self.levels, strict=True):
            entry: dict[str, Any] = {
                "kind": level.kind,
                "shape": [level.rows, level.cols],
                "hop_latency_ns": _tidy(level.hop_latency_s * 1e9),
                "link_bandwidth_gbytes_per_s": _tidy(level.link_bandwidth_bps / 1e9),
            }
            if level.centre_in_bps is not None:
                entry[_CENTRE_KEYS[0]] = _tidy(level.centre_in_bps / 1e9)
                entry[_CENTRE_KEYS[1]] = _tidy(level.centre_out_bps / 1e9)
            layers[lname] = entry
        out: dict[str, Any] = {
            "schema_version": 1,
            "kind": "noc_hierarchy",
            "name": self.name,
            "layers": layers,
            "port_spread": self.port_spread,
            "provenance": dict(self.provenance),
        }
        if self.energy is not None:
            out["energy_pj_per_bit"] = {
                "l1": self.energy.l1,
                "l2": self.energy.l2,
                "l3": self.energy.l3,
            }
        if self.measured_allreduce is not None:
            out["measured_allreduce"] = self.measured_allreduce.to_dict()
        if self.measured_collectives is not None:
            out["measured_collectives"] = self.measured_collectives.to_dict()
        if self.nic_bandwidth_bps is not None:
            out[NIC_KEY] = _tidy(self.nic_bandwidth_bps / 1e9)
        return out


def _tidy(x: float) -> float:
    """Drop unit-conversion noise (12 significant digits) so ``to_dict`` round-trips."""
    return float(f"{x:.12g}")


def _number(value: Any, fld: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProfileTypeError(fld, f"{fld.rsplit('.', 1)[-1]} must be a number")
    if not math.isfinite(value):
        raise ProfileError(fld, f"{fld.rsplit('.', 1)[-1]} must be finite")
    return float(value)


def _in_range(value: float, fld: str, bounds: tuple[float, float]) -> None:
    lo, hi = bounds
    if not lo <= value <= hi:
        name = fld.rsplit(".", 1)[-1]
        raise ProfileError(fld, f"{name} must be between {lo:g} and {hi:g} GB/s (got {value:g})")


def _parse_level(lname: str, raw: Any) -> Level:
    base = f"layers.{lname}"
    if not isinstance(raw, dict):
        raise ProfileTypeError(base, f"layer {lname} must be a JSON object")
    missing = [k for k in _LEVEL_REQUIRED if k not in raw]
    unknown = sorted(k for k in raw if k not in _LEVEL_REQUIRED + _CENTRE_KEYS)
    if missing or unknown:
        raise ProfileError(base, f"layer {lname}: missing {missing}, unknown {unknown}")
    kind = raw["kind"]
    if kind not in KINDS:
        raise ProfileError(
            f"{base}.kind", f"unknown topology kind {kind!r}; choose one of: {', '.join(KINDS)}"
        )
    shape = raw["shape"]
    if (
        not isinstance(shape, list | tuple)
        or len(shape) != 2
        or any(isinstance(x, bool) or not isinstance(x, int) for x in shape)
    ):
        raise ProfileTypeError(f"{base}.shape", "shape must be a list of two integers")
    rows, cols = int(shape[0]), int(shape[1])
    if rows < 1 or cols < 1:
        raise ProfileError(f"{base}.shape", "shape entries must be at least 1")
    if kind in ("switch", "ring", "chain") and rows != 1:
        raise ProfileError(f"{base}.shape", f"{kind} shape must be (1, N)")
    if kind in ("ring", "chain") and cols % 2:
        raise ProfileError(f"{base}.shape", f"{kind} size must be even")
    if kind in ("mesh2d", "torus2d", "mchain_nring", "mring_nchain") and any(
        d != 1 and d % 2 for d in (rows, cols)
    ):
        raise ProfileError(f"{base}.shape", f"{kind} dimensions must be 1 or even")
    if kind == "all_to_all" and rows * cols < 4:
        raise ProfileError(f"{base}.shape", "all_to_all needs at least 4 nodes")
    hop_ns = _number(raw["hop_latency_ns"], f"{base}.hop_latency_ns")
    if hop_ns < 0:
        raise ProfileError(f"{base}.hop_latency_ns", "hop_latency_ns must be non-negative")
    lo, hi = HOP_LATENCY_NS_RANGE
    if hop_ns != 0 and not lo <= hop_ns <= hi:
        raise ProfileError(
            f"{base}.hop_latency_ns",
            f"hop_latency_ns must be 0 or between {lo:g} and {hi:g} ns (got {hop_ns:g})",
        )
    bw = _number(raw["link_bandwidth_gbytes_per_s"], f"{base}.link_bandwidth_gbytes_per_s")
    if bw <= 0:
        raise ProfileError(
            f"{base}.link_bandwidth_gbytes_per_s",
            "link_bandwidth_gbytes_per_s must be greater than zero",
        )
    _in_range(bw, f"{base}.link_bandwidth_gbytes_per_s", BANDWIDTH_GBS_RANGE)
    centre = [raw.get(k) for k in _CENTRE_KEYS]
    cin = cout = None
    if any(c is not None for c in centre):
        if kind != "switch":
            raise ProfileError(
                f"{base}.switch_center_in_gbytes_per_s",
                "switch-center bandwidth is valid only for kind='switch'",
            )
        if any(c is None for c in centre):
            raise ProfileError(
                f"{base}.switch_center_in_gbytes_per_s",
                "switch_center_in_gbytes_per_s and switch_center_out_gbytes_per_s "
                "must be given together",
            )
        cin, cout = (_number(c, f"{base}.{k}") for c, k in zip(centre, _CENTRE_KEYS, strict=True))
        if cin <= 0 or cout <= 0:
            raise ProfileError(
                f"{base}.switch_center_in_gbytes_per_s",
                "switch-center bandwidth must be greater than zero",
            )
        for c, k in zip((cin, cout), _CENTRE_KEYS, strict=True):
            _in_range(c, f"{base}.{k}", CENTRE_GBS_RANGE)
        cin, cout = cin * 1e9, cout * 1e9
    return Level(kind, rows, cols, hop_ns * 1e-9, bw * 1e9, cin, cout)


def profile_from_dict(raw: Any, provenance_extra: dict[str, Any] | None = None) -> NocProfile:
    """Validate a ``noc_hierarchy`` dict (§1.2) and build a :class:`NocProfile`.

    Raises :class:`ProfileError` (field + rule) or :class:`ProfileTypeError`.
    """
    if not isinstance(raw, dict):
        raise ProfileTypeError("profile", "NoC profile must be a JSON object")
    missing = [k for k in _TOP_REQUIRED if k not in raw]
    unknown = sorted(k for k in raw if k not in _TOP_REQUIRED + _TOP_OPTIONAL)
    if missing or unknown:
        raise ProfileError(
            (missing or unknown)[0], f"NoC profile: missing {missing}, unknown {unknown}"
        )
    version = raw["schema_version"]
    if isinstance(version, bool) or version != 1:
        raise ProfileError("schema_version", f"unsupported schema_version {version!r}; expected 1")
    if raw["kind"] != "noc_hierarchy":
        raise ProfileError("kind", f"expected kind 'noc_hierarchy', got {raw['kind']!r}")
    name = raw["name"]
    if not isinstance(name, str) or not name:
        raise ProfileTypeError("name", "name must be a non-empty string")
    provenance = raw.get("provenance", {})
    if not isinstance(provenance, dict):
        raise ProfileTypeError("provenance", "provenance must be a JSON object")
    port_spread = raw.get("port_spread", "even")
    if port_spread not in ("even", "nearest"):
        raise ProfileError("port_spread", "port_spread must be one of even, nearest")
    energy = None
    if raw.get("energy_pj_per_bit") is not None:
        e = raw["energy_pj_per_bit"]
        if not isinstance(e, dict) or set(e) != {"l1", "l2", "l3"}:
            raise ProfileError(
                "energy_pj_per_bit", "energy_pj_per_bit must have exactly the keys l1, l2 and l3"
            )
        vals = {k: _number(e[k], f"energy_pj_per_bit.{k}") for k in ("l1", "l2", "l3")}
        if any(v < 0 for v in vals.values()):
            raise ProfileError("energy_pj_per_bit", "energy_pj_per_bit values must be >= 0")
        energy = EnergyConfig(**vals)
    layers = raw["layers"]
    if not isinstance(layers, dict):
        raise ProfileTypeError("layers", "layers must be a JSON object")
    if set(layers) != set(LEVEL_NAMES):
        raise ProfileError("layers", "layers must have exactly the keys L3, L2 and L1")
    levels = tuple(_parse_level(n, layers[n]) for n in LEVEL_NAMES)
    measured = None
    if raw.get("measured_allreduce") is not None:
        l1 = levels[2]
        measured = parse_measured_allreduce(raw["measured_allreduce"], l1.kind, l1.size)
    ops = None
    if raw.get("measured_collectives") is not None:
        l1 = levels[2]
        ops = parse_measured_collectives(raw["measured_collectives"], l1.kind, l1.size)
    nic = None
    if raw.get(NIC_KEY) is not None:
        nic = _number(raw[NIC_KEY], NIC_KEY)
        _in_range(nic, NIC_KEY, BANDWIDTH_GBS_RANGE)
        nic *= 1e9
    prov = dict(provenance)
    if provenance_extra:
        prov.update(provenance_extra)
    return NocProfile(name, levels, energy, prov, port_spread, measured, ops, nic)  # type: ignore[arg-type]
