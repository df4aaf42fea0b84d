"""Energy is whole and plans have a price (issue 30, item 1).

* A fixed-bandwidth memory without an energy figure is priced at the cited HBM2 default
  (``DEFAULT_MEMORY_ENERGY``, 3.97 pJ/bit), exactly as if its profile said so; before, its energy
  per token was the NoC's alone and a data-parallel plan scored 0 J.
* ``estimate.cost``: $/Mtok (output and input), tokens/s per kW and W per device from the price
  file, checked on hand-computed cases; a chip without a price gets none and says why.
"""

from __future__ import annotations

import json
import math

import pytest

from plena_opt.api import estimate_plan, load_problem
from plena_opt.chip.gpu.profile import gpu_profile_names
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.cost import cost_figures, load_prices, parse_prices, plan_cost
from plena_opt.estimate.plan import Plan
from plena_opt.memory.profiles import __file__ as _profiles_init
from plena_opt.search.space.objectives import Constraints

FIXED = dict(
    model="llama-3.1-8b",
    noc="illustrative_gpu_node_8",
    memory="fictional_fixed_bandwidth",
    batch_size=8,
    input_seq=512,
    output_seq=32,
)
GPU = dict(model="llama-3.1-8b", noc="hgx-h200x8", chip="h200-sxm", output_seq=64)


def _fixed_with_energy(tmp_path, pj: float) -> str:
    """The shipped fixed-bandwidth profile plus an explicit energy section of ``pj`` pJ/bit."""
    from pathlib import Path

    doc = json.loads((Path(_profiles_init).parent / "fictional_fixed_bandwidth.json").read_text())
    doc["energy"] = {"read_pj_per_bit": pj, "write_pj_per_bit": pj}
    path = tmp_path / "fixed_with_energy.json"
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_memory_without_energy_is_priced_as_the_cited_hbm2_figure(tmp_path):
    """Every plan's energy equals that of the same memory whose profile states 3.97 pJ/bit (and
    differs from 2× that figure, so the memory term is really counted)."""
    ev = load_problem(**FIXED).evaluator()
    plans = ev.legal_plans()
    got = [m.energy_per_token_joules for m in ev.evaluate_batch(plans)]
    same = load_problem(**{**FIXED, "memory": _fixed_with_energy(tmp_path, 3.97)}).evaluator()
    want = [m.energy_per_token_joules for m in same.evaluate_batch(plans)]
    assert got == want
    double = load_problem(**{**FIXED, "memory": _fixed_with_energy(tmp_path, 7.94)}).evaluator()
    assert all(
        d > g
        for d, g in zip(
            [m.energy_per_token_joules for m in double.evaluate_batch(plans)], got, strict=True
        )
    )


@pytest.mark.parametrize(
    "case",
    [FIXED, {**FIXED, "memory": "fictional_stacked_dram"}, GPU],
    ids=["plena-fixed-bandwidth", "plena-stacked-dram", "gpu"],
)
def test_no_plan_that_does_work_costs_zero_joules(case):
    ev = load_problem(**case).evaluator()
    energies = [m.energy_per_token_joules for m in ev.evaluate_batch(ev.legal_plans())]
    assert energies and all(e is not None and e > 0 for e in energies)


def test_a_data_parallel_plan_pays_for_reading_its_weights():
    """dp8: every replica reads its layers' weights each decode step; a step yields one token
    per sequence. So J/token ≥ 8 bit/B · 3.97 pJ/bit · layer weight bytes · 8 devices / batch.
    The layers are taken as 80 % of the held weights: the embedding table and the LM head
    (13 % of llama-3.1-8b's bytes: 2 × 128256 × 4096 of 8.0e9 parameters) are not read whole."""
    ev = load_problem(**FIXED).evaluator()
    m = ev.evaluate(Plan(dp=8))
    floor = 8 * 3.97e-12 * 0.8 * m.weight_bytes_per_device * 8 / FIXED["batch_size"]
    assert m.energy_per_token_joules >= floor > 0


def test_dollars_per_million_tokens_on_a_hand_computed_case():
    prices = parse_prices(
        {
            "schema_version": 1,
            "chips": {"x": {"usd_per_gpu_hour": 2.0, "source": "test", "date": "2026-01-02"}},
            "site": {
                "usd_per_kwh": 0.1,
                "usd_per_kwh_source": "test",
                "pue": 1.5,
                "pue_source": "test",
                "date": "2026-01",
            },
        }
    )
    c = cost_figures(
        "x",
        prices,
        devices=8,
        tps=1000.0,
        ttft_seconds=0.5,
        energy_j_per_token=2.0,
        prompt_tokens=4096,
    )
    # 8 GPUs × $2/h = $16/h = $0.004444/s over 1000 tokens/s → $4.4444/Mtok of GPU time;
    # 2 J × 1.5 PUE = 3 J = 8.333e-7 kWh × $0.1 → $0.08333/Mtok of electricity.
    assert c.usd_per_million_output_tokens == pytest.approx(4.444444 + 0.083333, rel=1e-6)
    # 2 J/token × 1000 tokens/s = 2000 W over 8 devices = 250 W each; 1000 tokens/s per 2 kW.
    assert c.power_watts_per_device == pytest.approx(250.0)
    assert c.tps_per_kilowatt == pytest.approx(500.0)
    # Input: 0.5 s of the cluster ($0.0022222 GPU + 2000 W·0.5 s·1.5 = 1500 J = $4.1667e-5)
    # over 4096 prompt tokens.
    assert c.usd_per_million_input_tokens == pytest.approx(
        1e6 * (0.0022222222 + 4.1666667e-5) / 4096, rel=1e-6
    )
    assert c.cost_note is None


def test_a_gpu_plan_is_priced_from_the_shipped_file():
    problem = load_problem(**GPU)
    est = estimate_plan(problem, Plan(tp=8))
    m, c = est.metrics, est.cost
    prices = load_prices()
    h, site = prices.chips["h200-sxm"].usd_per_gpu_hour, prices.site
    want = 1e6 * (
        8 * h / 3600 / m.tps + m.energy_per_token_joules * site.pue * site.usd_per_kwh / 3.6e6
    )
    assert c.usd_per_million_output_tokens == pytest.approx(want, rel=1e-12)
    assert c.power_watts_per_device == pytest.approx(m.energy_per_token_joules * m.tps / 8)
    # A cheaper hour makes a cheaper token.
    cheap = prices.model_copy(
        update={
            "chips": {
                "h200-sxm": prices.chips["h200-sxm"].model_copy(update={"usd_per_gpu_hour": h / 2})
            }
        }
    )
    assert plan_cost(m, problem.workload, "h200-sxm", cheap).usd_per_million_output_tokens < want


def test_a_plena_chip_has_no_guessed_price():
    est = estimate_plan(load_problem(**FIXED), Plan(tp=8))
    c = est.cost
    assert c.usd_per_million_output_tokens is None and c.usd_per_million_input_tokens is None
    assert "plena-default" in c.cost_note and "no price" in c.cost_note
    assert c.power_watts_per_device > 0  # power comes from the energy model, not the price


def test_shipped_prices_name_real_gpu_profiles_with_source_and_date():
    prices = load_prices()
    assert prices.chips and set(prices.chips) <= set(gpu_profile_names())
    for p in prices.chips.values():
        assert "https://" in p.source and p.date.startswith("2026")
    assert "https://" in prices.site.usd_per_kwh_source and "https://" in prices.site.pue_source


def _prices_doc(**override) -> dict:
    doc = json.loads(json.dumps(load_prices().model_dump()))
    doc.update(override)
    return doc


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (
            {"chips": {"h100-sxm": {"usd_per_gpu_hour": -1, "source": "s", "date": "2026-01"}}},
            "prices.chips.h100-sxm.usd_per_gpu_hour",
        ),
        (
            {"chips": {"h100-sxm": {"usd_per_gpu_hour": 1, "source": "s", "date": "last year"}}},
            "prices.chips.h100-sxm.date",
        ),
        ({"site": None}, "prices.site"),
        ({"extra": 1}, "prices.extra"),
    ],
)
def test_a_bad_price_file_names_the_field(doc, field):
    with pytest.raises(PlenaInputError) as info:
        parse_prices(_prices_doc(**doc))
    assert info.value.field == field


def test_cli_bad_price_file_exits_2_naming_the_field(tmp_path, capsys):
    bad = _prices_doc(site={**load_prices().site.model_dump(), "pue": 0.5})
    path = tmp_path / "p.json"
    path.write_text(json.dumps(bad))
    code = main(
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "hgx-h200x8",
            "--chip",
            "h200-sxm",
            "--tp",
            "8",
            "--prices",
            str(path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "prices.site.pue" in err
    assert "Traceback" not in err


def test_cli_estimate_json_has_the_cost_fields(tmp_path, capsys):
    own = _prices_doc(
        chips={"h200-sxm": {"usd_per_gpu_hour": 10.0, "source": "s", "date": "2026-01"}}
    )
    path = tmp_path / "p.json"
    path.write_text(json.dumps(own))
    argv = [
        "estimate",
        "--model",
        "llama-3.1-8b",
        "--noc",
        "hgx-h200x8",
        "--chip",
        "h200-sxm",
        "--tp",
        "8",
        "--output-seq",
        "64",
        "--json",
    ]
    assert main(argv) == 0
    shipped = json.loads(capsys.readouterr().out)
    assert main([*argv, "--prices", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    for key in (
        "usd_per_million_output_tokens",
        "usd_per_million_input_tokens",
        "tps_per_kilowatt",
        "power_watts_per_device",
    ):
        assert doc[key] > 0
    assert doc["usd_per_million_output_tokens"] > shipped["usd_per_million_output_tokens"]
    assert doc["tps_per_kilowatt"] == shipped["tps_per_kilowatt"]  # power needs no price


def test_the_cost_sla_is_a_relative_excess_and_unpriced_plans_violate_it():
    c = Constraints(max_cost_per_mtok=2.0)

    class M:
        ttft_seconds, tps_per_sequence, fits_in_memory = 0.1, 10.0, None
        usd_per_million_output_tokens = 3.0

    assert c.values(M())["max_cost_per_mtok"] == pytest.approx(0.5)
    M.usd_per_million_output_tokens = None
    assert math.isinf(c.values(M())["max_cost_per_mtok"])
    assert "max_cost_per_mtok" in c.names()


def _search(capsys, *extra: str) -> tuple[int, dict | str]:
    code = main(
        [
            "search",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "hgx-h200x8",
            "--chip",
            "h200-sxm",
            "--output-seq",
            "64",
            "--storage",
            ":memory:",
            "--sampler",
            "exhaustive",
            "--recheck",
            "0",
            "--json",
            *extra,
        ]
    )
    out = capsys.readouterr()
    return code, (json.loads(out.out) if code == 0 else out.err)


def test_search_minimises_cost_and_honours_the_cost_sla(capsys):
    code, doc = _search(capsys, "--objectives", "cost-per-mtok")
    assert code == 0
    costs = [e["usd_per_million_output_tokens"] for e in doc["front"]]
    best = min(costs)
    code, every = _search(capsys, "--objectives", "ttft,tps")
    all_costs = [e["usd_per_million_output_tokens"] for e in every["front"]]
    assert best <= min(all_costs)
    limit = (best + max(all_costs)) / 2
    code, capped = _search(capsys, "--max-cost-per-mtok", str(limit))
    assert code == 0 and capped["front"]
    assert all(e["usd_per_million_output_tokens"] <= limit for e in capped["front"])
    assert "max_cost_per_mtok" in capped["constraints"]


def test_search_cost_objective_on_an_unpriced_chip_is_refused(capsys):
    code = main(
        [
            "search",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "illustrative_gpu_node_8",
            "--storage",
            ":memory:",
            "--objectives",
            "ttft,cost-per-mtok",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "objectives" in err and "plena-default" in err and "--prices" in err


def _powered_chip(tmp_path, busy: float, idle: float) -> str:
    path = tmp_path / f"plena-{busy}-{idle}.json"
    doc = {
        "base": "plena-default",
        "name": "plena-powered",
        "power": {"busy_watts": busy, "idle_watts": idle, "source": "test figure"},
    }
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_plena_chip_with_a_power_figure_prices_its_compute(tmp_path, capsys):
    """Busy = idle = P: every device draws P for the whole decode, so the energy grows by
    P · devices / tokens/s exactly. Busy 2P / idle P adds P over the compute seconds only."""
    base = load_problem(**FIXED).evaluator()
    flat = load_problem(**FIXED, chip=_powered_chip(tmp_path, 50.0, 50.0)).evaluator()
    peaky = load_problem(**FIXED, chip=_powered_chip(tmp_path, 100.0, 50.0)).evaluator()
    for plan in (Plan(tp=8), Plan(dp=8), Plan(tp=2, pp=4)):
        m0, m1, m2 = base.evaluate(plan), flat.evaluate(plan), peaky.evaluate(plan)
        added = m1.energy_per_token_joules - m0.energy_per_token_joules
        assert added == pytest.approx(50.0 * 8 / m0.tps, rel=1e-9)
        extra = m2.energy_per_token_joules - m1.energy_per_token_joules
        assert 0 < extra <= 50.0 * 8 / m0.tps
    code = main(
        [
            "estimate",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "illustrative_gpu_node_8",
            "--memory",
            "fictional_fixed_bandwidth",
            "--chip",
            _powered_chip(tmp_path, 100.0, 50.0),
            "--tp",
            "8",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "compute at the chip's busy/idle watts" in out


def test_a_bad_plena_power_figure_names_the_field(tmp_path):
    with pytest.raises(PlenaInputError) as info:
        load_problem(**FIXED, chip=_powered_chip(tmp_path, 10.0, 20.0))
    assert info.value.field == "power.idle_watts"


def test_search_csv_and_table_carry_the_cost_columns(tmp_path, capsys):
    import csv

    path = tmp_path / "front.csv"
    code = main(
        [
            "search",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "hgx-h200x8",
            "--chip",
            "h200-sxm",
            "--output-seq",
            "64",
            "--storage",
            ":memory:",
            "--sampler",
            "exhaustive",
            "--recheck",
            "0",
            "--csv",
            str(path),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0 and "$/Mtok" in out and "W/dev" in out
    rows = list(csv.DictReader(path.open()))
    assert rows and all(float(r["usd_per_million_output_tokens"]) > 0 for r in rows)
    assert all(float(r["power_watts_per_device"]) > 0 for r in rows)


def test_search_with_a_bad_price_file_exits_2(tmp_path, capsys):
    path = tmp_path / "p.json"
    path.write_text("{not json")
    code = main(
        [
            "search",
            "--model",
            "llama-3.1-8b",
            "--noc",
            "hgx-h200x8",
            "--chip",
            "h200-sxm",
            "--storage",
            ":memory:",
            "--prices",
            str(path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "prices" in err and "JSON" in err


def test_serving_deployments_carry_their_cost(capsys):
    """Aggregated and disaggregated deployments: $/Mtok = 10^6 · ($/h / 3600 / tokens/s per
    device + J/token · PUE · $/kWh / 3.6e6), the prefill inside the steady-state rate."""
    code, doc = _search(capsys, "--serving", "both")
    assert code == 0
    cmp = doc["serving"]["comparison"]
    prices = load_prices()
    h, site = prices.chips["h200-sxm"].usd_per_gpu_hour, prices.site
    for mode in ("aggregated", "disaggregated", "both"):
        assert cmp[mode]["front"]
        for e in cmp[mode]["front"]:
            want = 1e6 * (
                h / 3600 / e["tps_per_device"]
                + e["energy_j_per_token"] * site.pue * site.usd_per_kwh / 3.6e6
            )
            assert e["usd_per_million_output_tokens"] == pytest.approx(want, rel=1e-12)
            assert e["power_watts_per_device"] == pytest.approx(
                e["energy_j_per_token"] * e["tps_per_device"]
            )
            assert e["usd_per_million_input_tokens"] is None


def test_the_wire_carries_a_front_entry_cost_and_the_two_cost_lists_agree():
    from plena_opt.api import wire
    from plena_opt.estimate.cost import COST_FIELDS
    from plena_opt.search.result import FrontEntry

    assert wire.COST_FIELDS == COST_FIELDS
    e = FrontEntry(
        plan={"tp": 8, "batch_size": 4},
        label="tp8",
        ttft_ms=10.0,
        tps=100.0,
        tps_per_sequence=25.0,
        energy_j_per_token=1.0,
        weight_bytes_per_device=1.0,
        kv_cache_bytes_per_device=1.0,
        memory_bytes_per_device=2.0,
        fits_in_memory=True,
        bottleneck="dram",
        usd_per_million_output_tokens=3.5,
        usd_per_million_input_tokens=0.25,
        tps_per_kilowatt=1000.0,
        power_watts_per_device=12.5,
    )
    msg = wire.front_entry_to_proto(e)
    assert (
        msg.usd_per_million_output_tokens,
        msg.usd_per_million_input_tokens,
        msg.tps_per_kilowatt,
        msg.power_watts_per_device,
    ) == (3.5, 0.25, 1000.0, 12.5)
    assert not msg.HasField("cost_note")


def test_data_parallel_no_longer_wins_energy_for_free():
    """Before issue 30 dp8 scored 0 J/token (no collectives: NoC energy 0, memory not counted)
    and won the energy objective. Now each dp replica reads its own copy of the weights per
    step, 8× the bytes of tp8 for the same tokens, and tp8 uses less energy."""
    ev = load_problem(**FIXED).evaluator()
    metrics = ev.evaluate_batch(ev.legal_plans())
    best = min(metrics, key=lambda m: m.energy_per_token_joules)
    assert best.plan.dp < 8
    dp8 = ev.evaluate(Plan(dp=8)).energy_per_token_joules
    tp8 = ev.evaluate(Plan(tp=8)).energy_per_token_joules
    assert dp8 > tp8 > 0


def test_the_cost_sla_travels_through_the_proto_request(tmp_path):
    import argparse

    from plena_server.limits import ServerLimits
    from plena_server.search_request import search_request

    from plena_opt.cli import search_cmd
    from plena_opt.cli.remote import search_request_from_args

    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    gpu = ["--model", "llama-3.1-8b", "--noc", "hgx-h200x8", "--chip", "h200-sxm"]
    args = parser.parse_args(["search", *gpu, "--max-cost-per-mtok", "1.5"])
    msg = search_request_from_args(args)
    assert msg.options.max_cost_per_mtok == 1.5
    req, _ = search_request(msg, str(tmp_path / "s.log"), ServerLimits())
    assert req.max_cost_per_mtok == 1.5
    msg.options.max_cost_per_mtok = -1.0
    with pytest.raises(PlenaInputError, match="options.max_cost_per_mtok"):
        search_request(msg, str(tmp_path / "s.log"), ServerLimits())
    # the price file is the server's: a local one is refused naming the flag
    args = parser.parse_args(["search", *gpu, "--prices", "p.json"])
    with pytest.raises(PlenaInputError) as info:
        search_request_from_args(args)
    assert info.value.field == "prices"


def test_a_binary_or_missing_price_file_is_an_input_error_naming_prices(tmp_path):
    """A price file that is not UTF-8 was a UnicodeDecodeError traceback."""
    binary = tmp_path / "prices.json"
    binary.write_bytes(b'{"chips": "\xd0\xff"}')
    with pytest.raises(PlenaInputError, match="not UTF-8") as info:
        load_prices(binary)
    assert info.value.field == "prices"
    with pytest.raises(PlenaInputError, match="cannot read price file") as info:
        load_prices(tmp_path / "missing.json")
    assert info.value.field == "prices"
