"""The MoE kernel each engine runs an MXFP4 checkpoint's experts on (``chip.gpu.moe_kernels``):
the defaults per engine and GPU generation, estimate / search / export pricing and writing what
the engine runs, the ``--moe-kernel`` overrides and their refusals on every front end."""

from __future__ import annotations

import json

import pytest

from plena_opt import api
from plena_opt.chip.gpu.moe_kernels import (
    DEFAULT_MXFP4_MOE,
    ENGINE_MOE_KERNELS,
    ENGINES,
    GPU_GENERATION,
    default_moe_kernel,
    moe_kernel_flags,
    resolve_moe_kernel,
)
from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate.plan import Plan, Workload

OSS = dict(model="gpt-oss-120b", devices=1, input_seq=8192, output_seq=64, batch_size=4)


def _ttft(chip: str, noc: str, **kw) -> tuple[float, str | None]:
    """(TTFT s, the kernel the chip block reports) of gpt-oss-120b at TP 1 on one GPU."""
    problem = api.load_problem(chip=chip, noc=noc, **{**OSS, **kw})
    doc = api.estimate_plan(problem, Plan(tp=1)).document
    return float(doc["ttft_seconds"]), doc["chip"].get("moe_kernel")


def test_the_tables_cover_every_engine_and_generation() -> None:
    from plena_opt.serving import ENGINES as SERVING_ENGINES
    from plena_opt.serving.kernel_scale import ARCHITECTURE

    assert set(ENGINES) == set(SERVING_ENGINES) and GPU_GENERATION == ARCHITECTURE
    for key, kernel in DEFAULT_MXFP4_MOE.items():
        assert ENGINE_MOE_KERNELS[key][0] == kernel  # the default is a priced kernel
    assert set(DEFAULT_MXFP4_MOE) == {(e, g) for e in ENGINES for g in ("hopper", "blackwell")}


@pytest.mark.parametrize(
    ("engine", "chip", "compute", "weight_only", "kernel"),
    [
        ("vllm", "h100-sxm", "bf16", True, "triton"),  # Triton matmul_ogs, not Marlin
        ("vllm", "h200-sxm", "bf16", True, "triton"),
        ("vllm", "b200", "fp4", False, "bf16"),  # FlashInfer MXFP4 x BF16
        ("sglang", "h100-sxm", "bf16", True, "triton"),
        ("sglang", "gb200", "fp4", False, "mxfp8"),  # flashinfer_mxfp4, MXFP8 routed input
        ("trtllm", "h200-sxm", "bf16", True, "triton"),
        ("trtllm", "b200", "fp4", False, "mxfp8"),  # TRTLLM backend
        ("trtllm", "b300", "fp4", False, "mxfp8"),
    ],
)
def test_default_per_engine_and_chip(engine, chip, compute, weight_only, kernel) -> None:
    assert default_moe_kernel(engine, chip, "mxfp4", compute, weight_only) == kernel


def test_no_default_outside_mxfp4_experts_on_a_listed_gpu() -> None:
    assert default_moe_kernel("trtllm", "b200", "fp4", "fp4", False) is None  # NVFP4 checkpoint
    assert default_moe_kernel("trtllm", "b200", "bf16", "bf16", False) is None
    assert default_moe_kernel("vllm", "b200", "mxfp4", "fp8", False) is None  # served as fp8
    assert default_moe_kernel("vllm", "mi300x", "mxfp4", "bf16", True) is None  # AMD
    assert moe_kernel_flags(None) == moe_kernel_flags("triton") == {
        "marlin_moe": False, "mxfp8_moe": False, "bf16_moe": False}  # fmt: skip
    assert moe_kernel_flags("marlin")["marlin_moe"] and moe_kernel_flags("bf16")["bf16_moe"]


@pytest.mark.parametrize(
    ("engine", "kernel", "chip", "compute", "weight_only", "match"),
    [
        ("trtllm", "marlin", "h100-sxm", "bf16", True, "trtllm on h100-sxm"),
        ("vllm", "mxfp8", "h100-sxm", "bf16", True, "runs MXFP4 experts as triton or marlin"),
        ("vllm", "marlin", "b200", "fp4", False, "as bf16 or mxfp8"),
        ("trtllm", "bf16", "b200", "fp4", False, "as mxfp8"),
        ("vllm", "marlin", "mi300x", "bf16", True, "NVIDIA Hopper or Blackwell"),
    ],
)
def test_an_override_the_engine_does_not_run_there_is_refused(
    engine, kernel, chip, compute, weight_only, match
) -> None:
    with pytest.raises(PlenaInputError, match=match) as exc:
        resolve_moe_kernel(engine, kernel, chip, "mxfp4", compute, weight_only)
    assert exc.value.field == "moe_kernel"


def test_b200_trtllm_prices_the_experts_at_the_fp8_rate() -> None:
    """gpt-oss-120b, an 8k prompt on one B200: TensorRT-LLM's default is the explicit mxfp8
    kernel to the bit, and its prefill is slower than the fp4-peak price of the experts (the
    flags as before this change: ``engine=""``); vLLM's default (bf16 activations) slower
    again, and under its InferenceX recipe (``--moe-kernel mxfp8``) near the TensorRT-LLM price."""
    noc = "hgx-b200x8"
    trt, kernel = _ttft("b200", noc, precision="fp4", engine="trtllm")
    assert kernel == "mxfp8"
    explicit, _ = _ttft("b200", noc, precision="fp4", engine="trtllm", moe_kernel="mxfp8")
    assert trt == explicit
    problem = api.load_problem(chip="b200", noc=noc, precision="fp4", **OSS)
    from dataclasses import replace

    fp4_peak = replace(problem, workload=replace(problem.workload, engine=""))
    before = float(api.estimate_plan(fp4_peak, Plan(tp=1)).document["ttft_seconds"])
    assert trt > 1.1 * before
    vllm, vkernel = _ttft("b200", noc, precision="fp4")  # the default engine
    assert vkernel == "bf16" and vllm > 1.2 * trt
    recipe, _ = _ttft("b200", noc, precision="fp4", engine="vllm", moe_kernel="mxfp8")
    # the same experts as TensorRT-LLM's; vLLM's other fp4 GEMMs quantise their input in passes
    # of their own (TensorRT-LLM fuses them: ``FUSED_QUANT_ENGINES``), a few % of the prefill
    assert trt < recipe < 1.05 * trt


def test_h100_vllm_default_is_the_tables_triton_and_marlin_on_request() -> None:
    noc = "hgx-h100x8"
    triton, kernel = _ttft("h100-sxm", noc, engine="vllm")
    assert kernel == "triton"
    problem = api.load_problem(chip="h100-sxm", noc=noc, **OSS)
    from dataclasses import replace

    old = replace(problem, workload=replace(problem.workload, engine=""))  # before: no flags
    assert triton == float(api.estimate_plan(old, Plan(tp=1)).document["ttft_seconds"])
    marlin, mk = _ttft("h100-sxm", noc, engine="vllm", moe_kernel="marlin")
    assert mk == "marlin" and marlin > triton  # Marlin under the mma.sync ceiling at 8k tokens


def test_other_models_are_unchanged_by_the_engine() -> None:
    base = dict(model="llama-3.1-8b", chip="b200", noc="hgx-b200x8", devices=1, input_seq=2048)
    docs = [api.estimate_plan(api.load_problem(**base, engine=e), Plan(tp=1)).document
            for e in ENGINES]  # fmt: skip
    assert len({d["ttft_seconds"] for d in docs}) == 1 and "moe_kernel" not in docs[0]["chip"]


def test_under_load_prices_the_engine_it_is_given() -> None:
    """``serve_under_load`` on a problem loaded for vLLM, with engine trtllm: the TensorRT-LLM
    kernel prices the load (the same step as a problem loaded for trtllm)."""
    problem = api.load_problem(chip="b200", noc="hgx-b200x8", precision="fp4", **OSS)
    trt = api.load_problem(chip="b200", noc="hgx-b200x8", precision="fp4", engine="trtllm", **OSS)
    a = api.serve_under_load(problem, Plan(tp=1), "trtllm", concurrency=4)
    b = api.serve_under_load(trt, Plan(tp=1), "trtllm", concurrency=4)
    v = api.serve_under_load(problem, Plan(tp=1), "vllm", concurrency=4)
    assert a.steady.ttft_seconds == b.steady.ttft_seconds
    # the decode step is the kernel's (TTFT also moves with the step budget: vLLM 0.34.0 runs
    # 16384 tokens per step on a B200, TensorRT-LLM 8192; serving.vllm_budget)
    assert a.steady.tpot_seconds == b.steady.tpot_seconds < v.steady.tpot_seconds


def test_cli_flags_and_refusals(capsys) -> None:
    argv = ["estimate", "--model", "gpt-oss-120b", "--chip", "h100-sxm", "--noc", "hgx-h100x8",
            "--devices", "1", "--tp", "1", "--input-seq", "1024", "--output-seq", "16",
            "--json"]  # fmt: skip
    assert main([*argv, "--engine", "sglang", "--moe-kernel", "marlin"]) == 0
    assert json.loads(capsys.readouterr().out)["chip"]["moe_kernel"] == "marlin"
    assert main([*argv, "--engine", "trtllm", "--moe-kernel", "marlin"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: moe_kernel 'marlin': trtllm on h100-sxm"), err
    assert main([*argv, "--moe-kernel", "mxfp8"]) == 2  # H100: no fp4 tensor cores
    assert "moe_kernel" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--moe-kernel", "cutlass"])  # not a kernel name
    assert exit_.value.code == 2
    assert "--moe-kernel" in capsys.readouterr().err
    plena = ["estimate", "--model", "llama-3.2-1b", "--noc", "illustrative_gpu_node_8", "--tp",
             "8", "--fixed-bandwidth-gbs", "1000", "--moe-kernel", "marlin"]  # fmt: skip
    assert main(plena) == 2
    assert "give a GPU chip" in capsys.readouterr().err


def test_workload_bounds() -> None:
    with pytest.raises(PlenaInputError, match="moe_kernel must be one of"):
        Workload(moe_kernel="cutlass")
    with pytest.raises(PlenaInputError, match="engine must be one of"):
        Workload(engine="tgi")
    with pytest.raises(PlenaInputError, match="give engine"):
        Workload(engine="", moe_kernel="marlin")
    with pytest.raises(PlenaInputError, match="give one") as exc:
        Workload(moe_kernel="marlin", mxfp8_moe=True)
    assert exc.value.field == "moe_kernel"


@pytest.mark.parametrize(
    ("chip", "engine", "kernel", "expect"),
    [
        ("b200", "vllm", None, ["--moe-backend", "flashinfer_trtllm", "--port"]),
        (
            "b200",
            "vllm",
            "mxfp8",
            [
                "--moe-backend",
                "flashinfer_trtllm",
                "--quantization-config",
                '{"moe":{"activation":"mxfp8"}}',
            ],
        ),  # fmt: skip
        ("h100-sxm", "vllm", None, ["--moe-backend", "triton"]),
        ("h100-sxm", "vllm", "marlin", ["--moe-backend", "marlin"]),
        ("b200", "sglang", None, ["--moe-runner-backend", "flashinfer_mxfp4", "--port"]),
        (
            "b200",
            "sglang",
            "bf16",
            [
                "--moe-runner-backend",
                "flashinfer_mxfp4",
                "--flashinfer-mxfp4-moe-precision",
                "bf16",
            ],
        ),  # fmt: skip
        ("h100-sxm", "sglang", None, ["--moe-runner-backend", "triton_kernel"]),
    ],
)
def test_export_writes_the_priced_kernel(chip, engine, kernel, expect) -> None:
    from plena_opt.api.exports import export_moe
    from plena_opt.api.launch import ExportSpec, bundle

    spec = ExportSpec(model="openai/gpt-oss-120b", input_len=1024, output_len=128,
                      **export_moe(chip, "gpt-oss-120b", None, kernel))  # fmt: skip
    (server, _) = bundle("tp1-ep1-dp1-pp1-cp1-replace-none-b4", spec, (engine,))
    argv = server.argv
    i = argv.index(expect[0])
    assert argv[i : i + len(expect)] == expect


def test_export_trtllm_yaml_and_refusal(capsys) -> None:
    from plena_opt.api.exports import export_moe
    from plena_opt.api.launch import ExportSpec, bundle

    key = "tp1-ep1-dp1-pp1-cp1-replace-none-b4"
    for chip, backend in (("b200", "TRTLLM"), ("h200-sxm", "TRITON")):
        spec = ExportSpec(model="openai/gpt-oss-120b", input_len=1024, output_len=128,
                          **export_moe(chip, "gpt-oss-120b"))  # fmt: skip
        server = bundle(key, spec, ("trtllm",))[0]
        assert f"moe_config:\n  backend: {backend}" in next(iter(server.files.values()))
    llama = ExportSpec(model="meta-llama/Llama-3.1-8B", input_len=1024, output_len=128,
                       **export_moe("b200", "llama-3.1-8b"))  # fmt: skip
    assert "moe_config" not in next(iter(bundle(key, llama, ("trtllm",))[0].files.values()))
    argv = ["export", key, "--model", "gpt-oss-120b", "--gpu", "h100-sxm", "--moe-kernel",
            "marlin", "--format", "trtllm"]  # fmt: skip
    assert main(argv) == 2
    assert "trtllm on h100-sxm (hopper) runs MXFP4 experts as triton" in capsys.readouterr().err
    assert main([*argv[:-1], "vllm"]) == 0
    assert "--moe-backend marlin" in capsys.readouterr().out


def test_an_estimate_on_an_engine_reads_its_fused_input_quantisation() -> None:
    """A static estimate priced on TensorRT-LLM reads a quantised GEMM's input as stored (its
    fused norm-quant kernels), as its serving step model does: the same workload either way, and
    an fp8 prefill cheaper than vLLM's (two bf16 quantisation passes, README_serving r16bytes)."""
    from plena_opt.api.moe_kernel import engine_inputs
    from plena_opt.serving.engines import engine_model
    from plena_opt.serving.steps import engine_workload

    base = dict(model="llama-3.1-70b", chip="h100-sxm", noc="hgx-h100x8", devices=8,
                precision="fp8", input_seq=2048, output_seq=16)  # fmt: skip
    ttft = {}
    for engine in ENGINES:
        problem = api.load_problem(**base, engine=engine)
        step = engine_model(engine, 80 * 2**30)
        assert engine_workload(problem.workload, step) is problem.workload
        vllm = api.load_problem(**base)  # the default engine, re-priced on this one
        assert engine_inputs(vllm, engine).workload == problem.workload
        ttft[engine] = float(api.estimate_plan(problem, Plan(tp=8)).document["ttft_seconds"])
    assert ttft["trtllm"] < ttft["vllm"] == ttft["sglang"]
