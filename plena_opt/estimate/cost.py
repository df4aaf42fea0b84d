"""What a plan costs: dollars per million tokens, tokens/s per kW and power per device.

Prices come from a price file (``prices.json`` beside this module, or ``--prices FILE`` in the
same schema): per chip name the on-demand ``usd_per_gpu_hour`` with its source and date, and per
site ``usd_per_kwh`` and ``pue``. A chip the file does not price gets no dollar figures and a
``cost_note`` that says so: a price is never guessed.

Formulas (``n`` devices of the plan, ``tps`` system decode tokens/s, ``E`` joules per generated
token from the evaluator's energy model, ``h`` $/GPU-hour, ``k`` $/kWh):

* power per device (W) = ``E · tps / n`` (the mean draw over the decode);
* tokens/s per kW = ``tps / (n · power / 1000)`` = ``1000 / E`` (device power, before PUE);
* $/Mtok output = ``1e6 · (n · h / (3600 · tps) + E · PUE · k / 3.6e6)``;
* $/Mtok input = ``1e6 · n · ttft · (h / 3600 + power · PUE · k / 3.6e6) / prompt_tokens``:
  the whole cluster for the time to first token of one micro-batch, charged to that
  micro-batch's prompt tokens (``ceil(batch / pp) · input_seq_len``), at the decode's mean power.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from plena_opt.errors import PlenaInputError

DEFAULT_PRICES = Path(__file__).with_name("prices.json")
SECONDS_PER_HOUR = 3600.0
JOULES_PER_KWH = 3.6e6
MAX_PRICES_BYTES = 1 << 20  # a price file is a few KiB; refuse anything far larger

Positive = Annotated[float, Field(gt=0, lt=1e6, allow_inf_nan=False)]
DateText = Annotated[str, Field(pattern=r"^\d{4}-\d{2}(-\d{2})?$")]
Text = Annotated[str, Field(min_length=1, max_length=500)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ChipPrice(_Strict):
    """On-demand price of one device (USD per GPU-hour), its source and date (YYYY-MM[-DD])."""

    usd_per_gpu_hour: Positive
    source: Text
    date: DateText


class SitePrice(_Strict):
    """Electricity price (USD per kWh) and power usage effectiveness (total / IT power, ≥ 1)."""

    usd_per_kwh: Annotated[float, Field(ge=0, lt=100, allow_inf_nan=False)]
    usd_per_kwh_source: Text
    pue: Annotated[float, Field(ge=1, le=5, allow_inf_nan=False)]
    pue_source: Text
    date: DateText


class Prices(_Strict):
    """A price file: chips by profile name (``h100-sxm``, ``b200``, …) and one site."""

    schema_version: int = Field(ge=1, le=1)
    notes: str | None = Field(default=None, max_length=2000)
    chips: dict[Annotated[str, Field(min_length=1, max_length=64)], ChipPrice] = Field(
        max_length=256
    )
    site: SitePrice


def _input_error(exc: ValidationError, origin: str) -> PlenaInputError:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "prices"
    return PlenaInputError(f"prices.{where}", f"{origin}: {err['msg']}")


def parse_prices(doc: Any, origin: str = "prices") -> Prices:
    """A validated price file from its JSON document (errors name ``prices.<field>``)."""
    if not isinstance(doc, dict):
        raise PlenaInputError("prices", f"{origin}: a price file is a JSON object")
    try:
        return Prices.model_validate(doc)
    except ValidationError as exc:
        raise _input_error(exc, origin) from exc


def load_prices(path: str | Path | None = None) -> Prices:
    """The shipped defaults (``path`` None) or a user's price file, validated."""
    if path is None:
        return _default_prices()
    from plena_opt.jsonio import read_user_text

    p = Path(path)
    text = read_user_text(p, "prices", "price", MAX_PRICES_BYTES)
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise PlenaInputError("prices", f"{p.name}: not valid JSON ({exc})") from exc
    return parse_prices(doc, p.name)


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not a number")


@lru_cache(maxsize=1)
def _default_prices() -> Prices:
    return parse_prices(json.loads(DEFAULT_PRICES.read_text()), DEFAULT_PRICES.name)


@dataclass(frozen=True)
class CostFigures:
    """Cost and power of one plan: USD per million output / input tokens (None: the chip has no
    price; ``cost_note`` says why), decode tokens/s per kW of device power and the mean power
    per device (W) (None without an energy figure)."""

    usd_per_million_output_tokens: float | None
    usd_per_million_input_tokens: float | None
    tps_per_kilowatt: float | None
    power_watts_per_device: float | None
    cost_note: str | None = None

    def to_dict(self) -> dict[str, float | str | None]:
        return asdict(self)


COST_FIELDS = tuple(CostFigures.__dataclass_fields__)


def cost_figures(
    chip: str,
    prices: Prices,
    *,
    devices: int,
    tps: float,
    ttft_seconds: float,
    energy_j_per_token: float | None,
    prompt_tokens: float,
) -> CostFigures:
    """Cost and power of a plan on ``devices`` chips named ``chip`` (module docstring)."""
    ok = tps > 0 and math.isfinite(tps)
    e = energy_j_per_token if ok else None
    power = None if e is None else e * tps / devices
    per_kw = None if power is None or power <= 0 else tps / (devices * power / 1e3)
    price = prices.chips.get(chip)
    if price is None or not ok:
        why = f"no price for chip {chip!r} in the price file" if ok else "no decode throughput"
        return CostFigures(None, None, per_kw, power, why)
    site = prices.site
    usd_per_joule = site.pue * site.usd_per_kwh / JOULES_PER_KWH
    gpu_usd_per_s = devices * price.usd_per_gpu_hour / SECONDS_PER_HOUR
    out = 1e6 * (gpu_usd_per_s / tps + (e or 0.0) * usd_per_joule)
    energy_usd_per_s = devices * (power or 0.0) * usd_per_joule
    inp = None
    if prompt_tokens > 0 and math.isfinite(ttft_seconds):
        inp = 1e6 * ttft_seconds * (gpu_usd_per_s + energy_usd_per_s) / prompt_tokens
    note = None if e is not None else "energy not modelled: the dollar figures omit electricity"
    return CostFigures(out, inp, per_kw, power, note)


def deployment_cost(
    tps_per_device: float, energy_j_per_token: float | None, chip: str, prices: Prices
) -> CostFigures:
    """A serving deployment's cost from its steady-state tokens/s per device (its prefill time,
    or prefill pool, is inside that rate, so the output figure is all-in and no input figure is
    given) and its energy per token as the serving figures give it (the decode's: the serving
    model leaves prefill energy out, ``estimate.disaggregated``)."""
    e = None if energy_j_per_token is None or math.isnan(energy_j_per_token) else energy_j_per_token
    return cost_figures(
        chip,
        prices,
        devices=1,
        tps=tps_per_device,
        ttft_seconds=math.nan,
        energy_j_per_token=e,
        prompt_tokens=0.0,
    )


def plan_cost(metrics: Any, workload: Any, chip: str, prices: Prices) -> CostFigures:
    """``cost_figures`` of a ``PlanMetrics`` under ``workload`` (prompt tokens of one
    micro-batch: ``ceil(batch / pp) · input_seq_len``)."""
    plan = metrics.plan
    micro = math.ceil(workload.batch_size / plan.pp)
    return cost_figures(
        chip,
        prices,
        devices=plan.world_size,
        tps=metrics.tps,
        ttft_seconds=metrics.ttft_seconds,
        energy_j_per_token=metrics.energy_per_token_joules,
        prompt_tokens=micro * workload.input_seq_len,
    )
