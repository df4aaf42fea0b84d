"""The CLI applies the request bounds of the server and the web app (issue 29): ``--noise`` goes
through ``api.limits.check_noise`` (the one check every front end calls) and the cost cap
``--max-cost-per-mtok`` / ``SearchOptions.max_cost_per_mtok`` has the SLA range. Out of range is
``error: …`` naming the field and the range, exit 2, before any work is done."""

from __future__ import annotations

import pytest

from plena_opt.api import limits
from plena_opt.cli.main import main

SCHEDULE = ["simulate", "--schedule", "1f1b", "--pp", "2", "--microbatches", "4"]
SCHEDULE += ["--durations", "F=1,B=2", "--samples", "4"]
SEARCH = ["search", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8"]
SEARCH += ["--trials", "1", "--storage", ":memory:", "--recheck", "1"]
PLAN = ["simulate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8", "--tp", "8"]
PLAN += ["--samples", "4"]

TOO_BIG = [
    ("moe_experts=1099511627776,moe_tokens=8", "noise.moe.experts", "between 1 and 1,024"),
    (f"moe_experts={limits.MAX_MOE_EXPERTS + 1},moe_tokens=8", "noise.moe.experts", "1,024"),
    (f"moe_experts=8,moe_tokens={limits.MAX_MOE_TOKENS + 1}", "noise.moe.tokens", "16,777,216"),
    ('{"moe": {"experts": 8, "tokens": 8, "alpha": 1e300}}', "noise.moe.alpha", "1e+06"),
    ("straggler_p=0.1,straggler_high=1e300", "noise.straggler.factor_high", "between 1 and 100"),
]


def _run(capsys, argv: list[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("base", [SCHEDULE, PLAN, SEARCH], ids=["schedule", "plan", "search"])
@pytest.mark.parametrize(("noise", "field", "rule"), TOO_BIG)
def test_cli_noise_above_a_bound_is_refused(capsys, base, noise, field, rule):
    code, err = _run(capsys, [*base, "--noise", noise])
    assert code == 2, err
    assert err.startswith(f"error: --noise: {field} must be ") and rule in err
    assert "Traceback" not in err


def test_cli_noise_at_the_bound_runs(capsys):
    noise = f"moe_experts={limits.MAX_MOE_EXPERTS},moe_tokens=64,moe_top_k=2,moe_ep=4"
    code, err = _run(capsys, [*SCHEDULE, "--noise", noise])
    assert code == 0, err


def test_remote_requests_check_noise_before_connecting():
    """``--server`` builds the proto request after the same check (no server is contacted)."""
    import argparse

    from plena_opt.cli import search_cmd
    from plena_opt.cli.remote import search_request_from_args
    from plena_opt.errors import PlenaInputError

    parser = argparse.ArgumentParser()
    search_cmd.register(parser.add_subparsers())
    args = parser.parse_args([*SEARCH[:5], "--noise", "moe_experts=4096,moe_tokens=8"])
    with pytest.raises(PlenaInputError) as info:
        search_request_from_args(args)
    assert info.value.field == "noise.moe.experts"


@pytest.mark.parametrize("value", ["1e300", "inf", "nan", "-1", "0"])
def test_cli_cost_cap_outside_its_range_is_refused(capsys, value):
    code, err = _run(capsys, [*SEARCH[:5], "--max-cost-per-mtok", value])
    assert code == 2, err
    assert err.startswith("error: --max-cost-per-mtok: must be a finite number above 0")
    assert "at most 1,000,000,000" in err


def test_cost_cap_bound_is_the_sla_bound_of_every_front_end():
    from plena_opt.search.request import SearchRequest

    assert SearchRequest(max_cost_per_mtok=limits.MAX_SLA).max_cost_per_mtok == limits.MAX_SLA
    with pytest.raises(ValueError, match="at most 1,000,000,000"):
        SearchRequest(max_cost_per_mtok=limits.MAX_SLA * 10)


def test_cli_batch_size_list_has_the_remote_front_ends_bound(capsys):
    """65 batch sizes are refused as gRPC and the web planner refuse them; 64 are accepted."""
    sizes = ",".join(str(b) for b in range(1, limits.MAX_BATCH_SIZES + 2))
    code, err = _run(capsys, [*SEARCH[:5], "--batch-sizes", sizes])
    assert code == 2, err
    assert err.startswith("error: ") and "--batch-sizes lists 65 sizes; at most 64" in err
    assert "Traceback" not in err
    from plena_opt.cli.search_args import batch_list

    assert len(batch_list(sizes.rsplit(",", 1)[0])) == limits.MAX_BATCH_SIZES
