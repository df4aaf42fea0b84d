"""The pricing contracts (issue 27 item 2): a chip kind is one ``LayerPricer`` registered by its
``kind``, a memory kind one ``MemoryBase`` subclass, a network one registered back-end; each is
shown here by a toy that the evaluator prices without any other change."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from deepstack import switch_noc

from plena_opt.chip import load_chip
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate import network as network_mod
from plena_opt.estimate import pricer as pricer_mod
from plena_opt.estimate.distributed import PlanCost
from plena_opt.estimate.pricer import LayerPricer, chip_memory, pricer_class
from plena_opt.estimate.pricing import price_arrays
from plena_opt.memory import FixedBandwidthMemory, StackedDramModel, fixed_bandwidth, load_memory
from plena_opt.memory.base import MemoryBase
from plena_opt.models import load_model

MODEL = "llama-3.2-1b"
TOY_CYCLES = 1_000_000  # cycles of every toy layer, whatever its shape
TOY_HZ = 1e9  # the toy chip's clock (Hz): a toy layer takes 1 ms


@dataclass(frozen=True)
class ToyChip:
    """A chip profile of a kind the product does not ship."""

    name: str = "toy-chip"
    kind: str = "toy"
    power: Any = None


class ToyPricer(LayerPricer):
    """Every layer costs ``TOY_CYCLES`` at ``TOY_HZ``; no extras, energy as the memory says."""

    kind = "toy"

    def __init__(self, chip, precision, workload, memory, model=None) -> None:
        self.memory = memory

    def layer(self, s, kind, mode, q, kv, load, steps, cp):
        cycles = np.full(steps.points, float(TOY_CYCLES))
        return price_arrays(cycles, {}, {}, self.memory, TOY_HZ, "stage-roofline", steps)

    def extras(self, s, mode, q, steps, last_stage, cache, key):
        return {}

    def energy_per_token(self, cost, base):
        return base


@pytest.fixture
def toy_kind(monkeypatch):
    """The toy pricer registered for this test only."""
    monkeypatch.setitem(pricer_mod._REGISTRY, "toy", ToyPricer)
    return ToyPricer


def _evaluator(chip=None, memory=None, network: str = "deepstack", devices: int = 4) -> Evaluator:
    memory = memory if memory is not None else fixed_bandwidth(1000.0, 64.0)
    wl = Workload(batch_size=4, input_seq_len=128, output_seq_len=16)
    return Evaluator(load_model(MODEL), switch_noc(devices), memory, wl, chip, network=network)


def test_a_new_chip_kind_is_one_registered_pricer(toy_kind):
    """Registering a ``LayerPricer`` for ``kind: toy`` is all the evaluator needs: a plan is
    priced by it (decode step = layers × the toy layer's 1 ms; no collectives at dp=4)."""
    ev = _evaluator(chip=ToyChip())
    assert ev.chip_kind == "toy"
    m = ev.evaluate(Plan(dp=4))
    layers = load_model(MODEL).num_layers
    assert m.decode_step_seconds == pytest.approx(layers * TOY_CYCLES / TOY_HZ, rel=1e-12)
    assert m.ttft_seconds == pytest.approx(2 * layers * TOY_CYCLES / TOY_HZ, rel=1e-12)
    assert "chip" not in ev.estimate(Plan(dp=4)).to_dict()  # the toy describes nothing
    assert len(ev.legal_plans()) > 1


def test_an_unknown_chip_kind_is_refused_naming_kind():
    with pytest.raises(PlenaInputError) as err:
        _evaluator(chip=ToyChip(kind="tpu"))
    assert err.value.field == "kind" and "'tpu'" in str(err.value)
    with pytest.raises(PlenaInputError) as err:
        pricer_class("tpu")
    assert err.value.field == "kind" and "gpu" in str(err.value) and "plena" in str(err.value)
    # a profile document of an unknown kind is not loaded as a PLENA chip
    with pytest.raises(PlenaInputError) as err:
        load_chip({"base": "plena-default", "kind": "tpu"})
    assert err.value.field == "kind"
    assert load_chip({"base": "plena-default", "kind": "plena"}).name == "plena-default+custom"


def test_the_shipped_kinds_are_priced_by_their_pricers():
    assert _evaluator().ctx.pricer.kind == "plena"
    gpu = load_chip("h100-sxm")
    ev = Evaluator(load_model(MODEL), switch_noc(1), chip_memory(gpu), Workload(), gpu)
    assert ev.chip_kind == "gpu" and ev.ctx.pricer.describe()["kind"] == "gpu"
    assert chip_memory(load_chip()) is None  # a PLENA chip carries no memory of its own
    assert chip_memory(gpu).capacity_bytes == round(gpu.hbm.capacity_bytes.value)


class ToyMemory(MemoryBase):
    """A memory kind the product does not ship: 100 GB/s, transfers in 4 KiB pages."""

    kind = "toy_memory"
    __slots__ = ("name", "energy")
    usable_bandwidth_bytes_per_s = 100e9
    capacity_bytes = 2**36
    compute_frequency_scale = 1.0

    def __init__(self) -> None:
        self._freeze({"name": "toy-pages", "energy": None, "_quantum": 4096})

    def describe(self) -> dict:
        return {"name": self.name, "kind": self.kind}

    def warnings(self) -> list[str]:
        return []


def test_both_memory_models_share_one_rounding_and_energy():
    for cls in (FixedBandwidthMemory, StackedDramModel):
        assert issubclass(cls, MemoryBase)
        names = ("transfer_quantum_bytes", "quantize_bytes", "quantize_array", "energy_pj")
        for name in (*names, "__setattr__"):
            assert getattr(cls, name) is getattr(MemoryBase, name), (cls, name)
    stacked = load_memory("fictional_stacked_dram")
    with pytest.raises(AttributeError, match="use with_layers"):
        stacked.name = "x"


def test_a_new_memory_kind_is_one_subclass():
    mem = ToyMemory()
    assert (
        mem.transfer_quantum_bytes == 4096
        and mem.quantize_bytes(1) == 4096.0
        and mem.quantize_bytes(0) == 0.0
    )
    assert list(mem.quantize_array(np.array([1.0, 4097.0, -3.0]))) == [4096.0, 8192.0, -3.0]
    assert mem.energy_pj(1.0, 1.0) is None
    with pytest.raises(AttributeError, match="immutable"):
        mem.name = "y"
    ev = _evaluator(memory=mem)
    fixed = _evaluator(memory=fixed_bandwidth(100.0))  # the same bandwidth, no pages
    plan = Plan(dp=4)
    # pages only round traffic up: the toy memory is never faster, and it is priced
    assert ev.evaluate(plan).decode_step_seconds >= fixed.evaluate(plan).decode_step_seconds > 0


SECONDS_PER_BYTE = 1e-9  # the fake network: 1 GB/s for every collective, whatever the groups


@dataclass(frozen=True)
class FakeCost:
    seconds: float
    noc_energy_pj: float | None = None


class FakeNetwork:
    """A network back-end that prices every collective at ``SECONDS_PER_BYTE``."""

    def __init__(self, noc) -> None:
        self.noc = noc

    def price(self, op, scheme, dim, nbytes):
        size = {"tp": scheme.tp, "cp": scheme.cp, "pp": scheme.pp}.get(dim, 1)
        return (nbytes * SECONDS_PER_BYTE if size > 1 else 0.0), None

    def ep_all_to_all(self, scheme, *, bytes_per_token, micro_batch, seq, top_k, **_):
        return FakeCost(bytes_per_token * micro_batch * seq * top_k * SECONDS_PER_BYTE)


def test_the_evaluator_runs_on_another_network_back_end(monkeypatch):
    """The collectives come from the registered back-end: a TP all-reduce costs what the fake
    says; a plan without collectives prices exactly as on deepstack."""
    monkeypatch.setitem(network_mod._BACKENDS, "fake", FakeNetwork)
    assert isinstance(FakeNetwork(None), network_mod.NetworkBackend)
    fake, real = _evaluator(network="fake"), _evaluator()
    tp = Plan(tp=4)
    cost = PlanCost(fake.ctx, tp)
    m, prec = fake.model, fake.ctx.precision
    act = int(cost.shard.b_dev * m.hidden_size * prec.activation_bytes)
    for comm in cost.decode.comm.values():  # a dense layer: two TP all-reduces
        assert comm["tp_all_reduce"].seconds == pytest.approx(2 * act * SECONDS_PER_BYTE)
    assert fake.evaluate(tp).decode_step_seconds != real.evaluate(tp).decode_step_seconds
    dp = Plan(dp=4)
    assert fake.evaluate(dp).decode_step_seconds == real.evaluate(dp).decode_step_seconds
    assert fake.evaluate(dp).ttft_seconds == real.evaluate(dp).ttft_seconds


def test_an_unknown_network_back_end_is_refused_naming_network():
    with pytest.raises(PlenaInputError) as err:
        _evaluator(network="ns3")
    assert err.value.field == "network" and "deepstack" in str(err.value)
