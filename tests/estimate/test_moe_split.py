"""MoE layers split independently of attention (issue 24): ``Plan.moe_tp``.

Attention runs ``tp`` × ``ep`` (attention DP) per expert group; the routed experts run ``moe_tp``
× ``moe_ep`` over the same ``tp·ep`` devices. The ``replace``/``keep`` shorthands are two points
of that space and price alike.

Hand-computed exchanges (gpt-oss-120b decode, 64 sequences, bf16: 5,760 B per token; one
hgx-h200x8 node priced on its links alone, as ``tests/estimate/test_gpu_ep_dispatch.py``: a stage is
two NVLink hops ``2L`` plus the busiest GPU link's bytes / B; balanced rows send token t to experts
t + 32j, j = 0..3, one per group of 32 experts):

* attention TP1 × DP8, MoE TP8 × EP1: one expert group; no all-to-all, the 8 ranks all-gather
  the 64 tokens (each holds 8): the one-stage all-gather moves 7/8 of 64 tokens through each
  GPU's link: ``2L + 56·BPT/B`` per layer; no combine (the MoE TP all-reduce leaves the sums on
  every rank).
* attention TP1 × DP8, MoE TP2 × EP4: lane 0 of the MoE TP (GPUs 0, 2, 4, 6) holds only 4 of
  the 8 DP ranks' tokens, so the exchange is flat: a token goes once to each of its 4 groups over
  all 8 GPUs (8 tokens per GPU × 4 remote ranks = 32 copies), then each group's two TP ranks
  all-gather the 64 tokens it received (32 copies across): dispatch ``2·(2L + 32·BPT/B)``,
  combine ``2L + 32·BPT/B``.
* attention TP4 × DP2, MoE TP2 × EP4: moe_tp divides the attention TP, so each lane holds every
  DP rank's tokens (two replicas each): lane-wise EP4, 16 tokens per GPU to 3 remote groups =
  48 copies, ``2L + 48·BPT/B`` each way (the same as ``keep`` at tp2 ep4, which is this split).
"""

from __future__ import annotations

import csv

import pytest
from deepstack import load_noc_profile
from deepstack.profile import NocProfile, profile_from_dict

from plena_opt import api
from plena_opt.chip import load_chip
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Evaluator, Plan, Workload
from plena_opt.estimate.gpu import gpu_memory
from plena_opt.estimate.shard import shorthand_split
from plena_opt.export import plan_bundle
from plena_opt.export.launch import ExportSpec, parse_point_key
from plena_opt.models import load_model
from plena_opt.search.space.space import PlanSpace
from plena_opt.validate.serving_rows import ServingRow, resolve
from plena_opt.validate.serving_score import score_serving, shipped_serving_csv

MODEL = load_model("gpt-oss-120b")  # 36 MoE layers, hidden 2880, 128 experts, top-4
BPT = MODEL.hidden_size * 2


def _links_only(noc: str) -> NocProfile:
    return profile_from_dict({**load_noc_profile(noc).to_dict(), "measured_collectives": None})


def _decode_comm(plan: Plan) -> tuple[dict, dict]:
    chip = load_chip("h200-sxm")
    w = Workload(batch_size=64, input_seq_len=1024, output_seq_len=1024, precision="bf16")
    est = Evaluator(MODEL, _links_only("hgx-h200x8"), gpu_memory(chip), w, chip).estimate(plan)
    return est.moe, est.first_token_decode["stages"][0]["comm_seconds"]


def _stage(copies: float) -> float:
    l1 = load_noc_profile("hgx-h200x8").levels[2]
    return 2 * l1.hop_latency_s + copies * BPT / l1.link_bandwidth_bps


@pytest.mark.parametrize(
    ("plan", "split", "dispatch", "combine"),
    [
        (Plan(tp=1, ep=8, moe_tp=8), (8, 1), _stage(64 * 7 / 8), None),
        (Plan(tp=1, ep=8, moe_tp=2), (2, 4), 2 * _stage(32), _stage(32)),
        (Plan(tp=4, ep=2, moe_tp=2), (2, 4), _stage(48), _stage(48)),
        (Plan(tp=2, ep=4, moe_tp_mode="keep"), (2, 4), _stage(48), _stage(48)),
    ],
)
def test_dispatch_and_combine_by_hand(plan, split, dispatch, combine) -> None:
    moe, comm = _decode_comm(plan)
    layers = MODEL.num_layers
    assert (moe["tp"], moe["ep"]) == split
    assert comm["ep_dispatch"] == pytest.approx(layers * dispatch, rel=1e-12)
    if combine is None:
        assert "ep_combine" not in comm
    else:
        assert comm["ep_combine"] == pytest.approx(layers * combine, rel=1e-12)
    assert comm["moe_tp_all_reduce"] > 0  # the experts' TP partial sums


CASES = [  # (problem, shorthand plans): PLENA and GPU, replace and keep, with dp replicas
    (
        dict(model="qwen3-235b-a22b", batch_size=16, input_seq=512, output_seq=64),
        [Plan(tp=4, ep=8), Plan(tp=4, ep=8, moe_tp_mode="keep"), Plan(tp=2, ep=4, dp=4)],
    ),
    (
        dict(
            model="gpt-oss-120b",
            noc="hgx-h200x8@2",
            chip="h200-sxm",
            precision="bf16",
            routing="power_law",
        ),  # fmt: skip
        [Plan(tp=8, ep=2), Plan(tp=8, ep=2, moe_tp_mode="keep"), Plan(tp=2, ep=4, dp=2)],
    ),
]


@pytest.mark.parametrize(("spec", "plans"), CASES)
def test_shorthands_are_points_of_the_general_form(spec, plans) -> None:
    problem = api.load_problem(spec)
    experts = problem.model.num_experts
    for plan in plans:
        general = shorthand_split(plan, experts)
        assert general.moe_tp and general != plan
        a, b = (api.estimate_plan(problem, p).document for p in (plan, general))
        assert b["plan"].pop("moe_tp") == general.moe_tp
        assert b["plan"].pop("moe_ep") == plan.tp * plan.ep // general.moe_tp
        assert (a["plan"].pop("moe_tp_mode"), b["plan"].pop("moe_tp_mode")) == (
            plan.moe_tp_mode, "replace")  # fmt: skip
        assert a == b  # every figure bit-identical


def test_bad_splits_are_refused_naming_the_field(capsys) -> None:
    with pytest.raises(PlenaInputError) as exc:
        Plan(tp=1, ep=8, moe_tp=3)
    assert exc.value.field == "moe_tp" and "must divide the tp*ep=8" in str(exc.value)
    with pytest.raises(PlenaInputError, match="not both") as exc:
        Plan(tp=2, ep=4, moe_tp_mode="keep", moe_tp=4)
    assert exc.value.field == "moe_tp"
    base = ["estimate", "--model", "gpt-oss-120b", "--chip", "h200-sxm", "--noc", "hgx-h200x8"]
    assert main([*base, "--ep", "8", "--moe-tp", "3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and "moe_tp=3" in err and "Traceback" not in err
    # 6 GPUs as MoE TP1 x EP6: the 128 experts do not split over 6 ranks
    assert main([*base, "--devices", "6", "--ep", "6", "--moe-tp", "1"]) == 2
    err = capsys.readouterr().err
    assert "128 experts do not split evenly over 6" in err
    assert main(["estimate", "--model", "llama-3.1-8b", "--noc", "illustrative_gpu_node_8",
                 "--tp", "8", "--moe-tp", "8"]) == 2  # fmt: skip
    assert "moe_tp needs a model with MoE layers" in capsys.readouterr().err


def test_grpc_refuses_a_split_naming_the_field() -> None:
    from plena_proto import plena_opt_pb2 as pb
    from plena_server.convert import to_plan

    from plena_opt.api.wire import plan_from_proto, plan_to_proto

    with pytest.raises(PlenaInputError) as exc:
        to_plan(pb.Plan(tp=1, ep=8, moe_tp=3))
    assert exc.value.field == "plan.moe_tp"
    with pytest.raises(PlenaInputError) as exc:
        to_plan(pb.Plan(tp=1, ep=8, moe_tp=10**9))
    assert exc.value.field == "plan.moe_tp"
    assert to_plan(pb.Plan(tp=1, ep=8, moe_tp=2)) == Plan(tp=1, ep=8, moe_tp=2)
    wire = plan_to_proto(Plan(tp=1, ep=8, moe_tp=2))
    assert wire.moe_tp == 2 and plan_from_proto(wire) == Plan(tp=1, ep=8, moe_tp=2)
    assert not plan_to_proto(Plan(tp=8)).HasField("moe_tp")  # a shorthand: unset


def test_web_refuses_a_split_naming_the_field() -> None:
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from plena_opt.web.app import create_app

    client = TestClient(create_app(storage=":memory:"), base_url="http://127.0.0.1")
    body = {"model": "gpt-oss-120b", "noc": "illustrative_gpu_node_8", "tp": 1, "ep": 8,
            "pp": 1, "batch_size": 8, "input_seq": 256, "output_seq": 8}  # fmt: skip
    r = client.post("/api/estimate", json={**body, "moe_tp": 3})
    assert r.status_code == 422 and "moe_tp" in r.json()["field"]
    r = client.post("/api/estimate", json={**body, "moe_tp": -1})
    assert r.status_code == 422 and "moe_tp" in r.json()["field"]
    assert client.post("/api/estimate", json={**body, "moe_tp": 2}).status_code == 200


def test_search_space_explores_splits_and_a_search_fronts_one() -> None:
    """Under skewed expert loads (AIConfigurator's power law) fewer, larger EP ranks even out the
    busiest rank's load, so splits with MoE TP > 1 reach the front (e.g. attention TP8 over MoE
    TP4 x EP2)."""
    spec = api.ProblemSpec(
        model="gpt-oss-120b", noc="hgx-h200x8", chip="h200-sxm", precision="bf16",
        batch_size=64, input_seq=1024, output_seq=256, routing="power_law",
    )  # fmt: skip
    problem = spec.load()
    ev = problem.evaluator(64)
    space = PlanSpace(ev.num_devices, [64], ev.check)
    explicit = {p.plan for p in space.points if p.plan.moe_tp}
    assert Plan(tp=1, ep=8, moe_tp=2) in explicit and Plan(tp=4, ep=2, moe_tp=2) in explicit
    assert all(p.moe_tp not in (1, p.tp) for p in explicit)  # the shorthands are not repeated
    assert "moe_tp" in space.distributions()
    point = next(p for p in space.points if p.plan == Plan(tp=1, ep=8, moe_tp=2))
    assert space.point_from_params(space.params(point)) == (point, None)
    req = api.SearchRequest(problem=spec, batch_sizes=[64], sampler="exhaustive",
                            storage=":memory:")  # fmt: skip
    res = api.search_plans(req, problem)
    split = [e for e in res.front if e.plan.get("moe_tp")]
    assert split, [e.label for e in res.front]
    e = split[0]
    mt = e.plan["moe_tp"]
    assert (mt, e.plan["tp"] * e.plan["ep"] // mt) != (e.plan["tp"], e.plan["ep"])
    plan, batch, _ = parse_point_key(e.key)  # the export key carries the split
    assert plan.moe_tp == mt and batch == 64


SPEC = ExportSpec(model="openai/gpt-oss-120b", input_len=1024, output_len=256)


def _serve(engine: str, key: str):
    return [c for c in plan_bundle(engine, key, SPEC) if c.role == "serve"]


def test_exports_write_the_split() -> None:
    (v,) = _serve("vllm", "tp1-ep8-dp1-pp1-cp1-mtp1-none-b64")
    assert (
        "--enable-expert-parallel" in v.argv
        and v.argv[v.argv.index("--data-parallel-size") + 1] == "8"
    )
    (v,) = _serve("vllm", "tp1-ep8-dp1-pp1-cp1-mtp8-none-b64")  # experts TP over tp x dp
    assert "--enable-expert-parallel" not in v.argv and "--data-parallel-size" in v.argv
    (v,) = _serve("vllm", "tp1-ep8-dp1-pp1-cp1-mtp2-none-b64")
    assert v.refused and "moe_tp=2 x moe_ep=4" in v.refused[0]
    (s,) = _serve("sglang", "tp2-ep4-dp1-pp1-cp1-mtp2-none-b64")
    a = s.argv
    assert a[a.index("--tp-size") + 1] == "8" and "--enable-dp-attention" in a
    assert a[a.index("--dp-size") + 1] == "4" and a[a.index("--ep-size") + 1] == "4"
    (t,) = _serve("trtllm", "tp1-ep8-dp1-pp1-cp1-mtp2-none-b64")
    yaml = next(iter(t.files.values()))
    assert t.argv[t.argv.index("--tp_size") + 1] == "8"
    for line in ("enable_attention_dp: true", "moe_expert_parallel_size: 4",
                 "moe_tensor_parallel_size: 2"):  # fmt: skip
        assert line in yaml.splitlines()
    (t,) = _serve("trtllm", "tp2-ep4-dp1-pp1-cp1-mtp2-none-b64")  # attention TP2 x DP4
    assert t.refused and "enable_attention_dp" in t.refused[0]
    (s,) = _serve("sglang", "tp2-ep4-dp2-pp1-cp1-mtp2-none-b64")
    assert s.refused and "dp > 1" in s.refused[0]


# Rows of the shipped file refused before as "not expressible": DeepSeek-R1 on SGLang with
# attention TP16 under MoE TP4 x EP4, and gpt-oss-120b on TRT-LLM with attention DP4 under
# MoE TP4 x EP1. The DeepSeek row's id names 4 GPUs (tp4_ep4) where its fields name 16: since
# r6 the shipped row is refused for that (serving_rows._check_id_sizes); its fields alone, under
# an id that names no sizes, still price as the split.
ROWS = (
    ("2026_04_06_deepseek_r1_b200_sxm_sglang_fp4_agg_1024x1024_c4_tp4_ep4_1037", (16, 1, 4)),
    ("2026_04_06_gpt_oss_120b_b200_sxm_trtllm_fp4_agg_1024x1024_c32_tp4_ep1_296", (1, 4, 4)),
)


def test_previously_refused_shipped_rows_are_priced(tmp_path) -> None:
    with open(shipped_serving_csv(), newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or ())
        rows = [r for r in reader if r["id"] in dict(ROWS)]
    assert len(rows) == len(ROWS)
    for r in rows:
        d = resolve(ServingRow("fields-only", r))
        assert (d.tp, d.ep, d.moe_tp) == dict(ROWS)[r["id"]]
    path = tmp_path / "rows.csv"
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        w.writerows(rows)
    report = score_serving(path)
    by_id = {r.id: r for r in report.rows}
    r1, oss = by_id[ROWS[0][0]], by_id[ROWS[1][0]]
    assert r1.status == "refused" and "disagree with the row id: id tp4" in r1.reason
    assert oss.status == "priced" and oss.ttft_ms > 0 and oss.tpot_ms > 0
