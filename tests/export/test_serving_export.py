"""Launch configs (issue 16): flags from the one data file, unsupported features named."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.export import ENGINES, ExportSpec, bundle, parse_plan_key, plan_bundle

SPEC = ExportSpec(model="meta-llama/Llama-3.1-8B", input_len=2048, output_len=1024,
                  memory_fraction=0.8, gpus_per_node=16)  # fmt: skip


def _serve(engine, key, spec=SPEC):
    return [c for c in plan_bundle(engine, key, spec) if c.role == "serve"]


def test_every_written_flag_is_in_the_data_file():
    for engine in ("vllm", "sglang", "trtllm"):
        (c,) = _serve(engine, "tp4-ep1-dp2-pp2-cp1-replace-none-b64")
        known = set(ENGINES[engine]["flags"].values()) | {"--model-path", "--backend"}
        assert {a for a in c.argv if a.startswith("--")} <= known
        assert not c.refused
    (v,) = _serve("vllm", "tp4-ep1-dp2-pp2-cp1-replace-none-b64")
    i = v.argv.index
    assert v.argv[2] == "meta-llama/Llama-3.1-8B"
    assert v.argv[i("--tensor-parallel-size") + 1] == "4"
    assert v.argv[i("--pipeline-parallel-size") + 1] == "2"
    assert v.argv[i("--data-parallel-size") + 1] == "2"
    assert v.argv[i("--max-num-seqs") + 1] == "32"  # 64 sequences over 2 replicas
    assert v.argv[i("--gpu-memory-utilization") + 1] == "0.8"


def test_cp_is_written_for_vllm_and_sglang_and_keep_is_refused():
    (v,) = _serve("vllm", "tp2-ep1-dp1-pp1-cp2-replace-none-b8")
    assert (
        "--prefill-context-parallel-size" in v.argv and "--decode-context-parallel-size" in v.argv
    )
    (s,) = _serve("sglang", "tp2-ep1-dp1-pp1-cp2-replace-none-b8")
    assert s.argv[s.argv.index("--tp-size") + 1] == "4"  # attention CP inside a tp*cp group
    assert s.argv[s.argv.index("--attn-cp-size") + 1] == "2"
    for engine in ("vllm", "sglang", "trtllm"):
        (k,) = plan_bundle(engine, "tp2-ep2-dp1-pp1-cp1-keep-none-b8", SPEC)
        assert k.refused and not k.argv and any("keep" in r for r in k.refused)
        assert "REFUSED" in k.script() and "exit 1" in k.script()
    (e,) = _serve("vllm", "tp2-ep2-dp1-pp1-cp1-replace-none-b8")
    assert "--enable-expert-parallel" in e.argv and not e.refused


def test_the_model_is_the_real_one_never_the_placeholder(capsys):
    with pytest.raises(PlenaInputError, match="model"):
        ExportSpec(model="MODEL", input_len=1, output_len=1)
    assert main(["export", "tp2-ep1-dp1-pp1-cp1-replace-none-b8", "--model", "qwen3-32b"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["argv"][2] for d in doc if d["engine"] == "vllm" and d["role"] == "serve"] == [
        "Qwen/Qwen3-32B"
    ]
    assert "MODEL" not in json.dumps(doc)
    assert main(["export", "tp2-ep1-dp1-pp1-cp1-replace-none-b8", "--model-path", "/ckpt/m",
                 "--format", "sglang"]) == 0  # fmt: skip
    assert "--model-path /ckpt/m" in capsys.readouterr().out
    assert main(["export", "tp2-ep1-dp1-pp1-cp1-replace-none-b8"]) == 2
    assert "--model" in capsys.readouterr().err
    assert main(["export", "tp2-ep1-dp1-pp1-cp1-replace-none-b8", "--model",
                 "fictional-24-head"]) == 2  # fmt: skip
    assert "Hugging Face id" in capsys.readouterr().err


def test_multi_node_plans_get_one_command_per_node():
    spec = ExportSpec(model="m/m", input_len=8, output_len=8, gpus_per_node=8)
    one = _serve("vllm", "tp8-ep1-dp1-pp2-cp1-replace-none-b16", spec)
    assert [c.node for c in one] == [0, 1]
    assert "--headless" in one[1].argv and "--headless" not in one[0].argv
    assert one[1].argv[one[1].argv.index("--node-rank") + 1] == "1"
    assert "HEAD_IP:?" in one[0].script() and '"$HEAD_IP"' in one[0].script()
    dp = _serve("vllm", "tp8-ep1-dp2-pp1-cp1-replace-none-b16", spec)
    assert dp[1].argv[dp[1].argv.index("--data-parallel-start-rank") + 1] == "1"
    sg = _serve("sglang", "tp8-ep1-dp1-pp2-cp1-replace-none-b16", spec)
    assert all("--dist-init-addr" in c.argv for c in sg) and len(sg) == 2
    (t,) = plan_bundle("trtllm", "tp8-ep1-dp1-pp2-cp1-replace-none-b16", spec)
    assert t.refused and "spans nodes" in t.refused[0]


def test_bundles_carry_the_benchmark_of_the_priced_workload():
    spec = ExportSpec(model="m/m", input_len=300, output_len=70)
    for engine in ("vllm", "sglang", "trtllm"):
        (b,) = [c for c in plan_bundle(engine, "tp2-ep1-dp1-pp1-cp1-replace-none-b24", spec)
                if c.role == "bench"]  # fmt: skip
        a = b.argv
        assert a[a.index("--max-concurrency") + 1] == "24"
        assert a[a.index("--random-input-len") + 1] == "300"
        assert a[a.index("--random-output-len") + 1] == "70"
    dis = bundle("2P:tp2-ep1-dp1-pp1-cp1-replace-none-b4+3D:tp4-ep1-dp1-pp1-cp1-replace-none-b32",
                 spec, ("sglang",))  # fmt: skip
    roles = [c.role for c in dis]
    assert roles == ["prefill", "decode", "router", "bench"]
    bench = dis[-1].argv
    assert bench[bench.index("--max-concurrency") + 1] == "96"  # 3 decode workers x 32
    router = dis[2].argv
    assert router.count("--prefill") == 2 and router.count("--decode") == 3
    vl = bundle("1P:tp2-ep1-dp1-pp1-cp1-replace-none-b4+1D:tp4-ep1-dp1-pp1-cp1-replace-none-b32",
                spec, ("vllm",))  # fmt: skip
    cfg = json.loads(vl[0].argv[vl[0].argv.index("--kv-transfer-config") + 1])
    assert cfg["kv_connector"] == "NixlConnector"


def test_bad_key_and_cli(tmp_path, capsys):
    with pytest.raises(PlenaInputError, match="point_key"):
        parse_plan_key("tp8")
    rc = main(
        [
            "export",
            "tp2-ep1-dp1-pp1-cp1-replace-none-b8",
            "--decode-plan",
            "tp4-ep1-dp1-pp1-cp1-replace-none-b32",
            "--format",
            "sglang",
            "--engine-model",
            "org/m",
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert rc == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["deployment.json", "launch.json", "sglang-bench.sh", "sglang-decode.sh",
                     "sglang-prefill.sh", "sglang-router.sh"]  # fmt: skip
    deployment = json.loads((tmp_path / "deployment.json").read_text())
    assert deployment["disaggregated"] is True and deployment["model"] == "org/m"
    assert "--disaggregation-mode decode" in (tmp_path / "sglang-decode.sh").read_text()
    capsys.readouterr()
    assert main(["export", "tp2-ep2-dp1-pp1-cp1-replace-none-b8", "--format", "sglang",
                 "--engine-model", "org/m"]) == 2  # fmt: skip
    assert "cannot run this plan as priced" in capsys.readouterr().err


def test_search_export_dir_writes_one_file_per_pool(tmp_path, capsys):
    rc = main(
        [
            "search",
            "--model",
            "llama-3.2-1b",
            "--noc",
            "illustrative_gpu_node_8",
            "--fixed-bandwidth-gbs",
            "1000",
            "--batch-sizes",
            "8",
            "--output-seq",
            "8",
            "--input-seq",
            "256",
            "--objectives",
            "ttft,tps-per-device,tps-per-user",
            "--serving",
            "both",
            "--recheck",
            "0",
            "--storage",
            ":memory:",
            "--export-dir",
            str(tmp_path),
            "--export-top",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "wins" in out
    plan0 = sorted(p.name for p in (tmp_path / "plan0").iterdir())
    assert {"launch.json", "vllm-serve.sh", "vllm-bench.sh", "sglang-serve.sh"} <= set(plan0)
    assert "meta-llama/Llama-3.2-1B" in (tmp_path / "plan0" / "vllm-serve.sh").read_text()
    dis = sorted(p.name for p in (tmp_path / "disaggregated0").iterdir())
    assert {"sglang-decode.sh", "sglang-prefill.sh", "sglang-router.sh", "vllm-decode.sh",
            "vllm-prefill.sh", "vllm-bench.sh", "trtllm-REFUSED.txt"} <= set(dis)  # fmt: skip
    assert "instance(s)" in (tmp_path / "disaggregated0" / "vllm-decode.sh").read_text()


def test_comparison_is_stored_as_a_study_and_never_overwrites_a_users(tmp_path, capsys):
    import optuna

    from plena_opt.search.storage.storage import open_storage

    store = str(tmp_path / "s.log")
    argv = [
        "search",
        "--model",
        "llama-3.2-1b",
        "--noc",
        "illustrative_gpu_node_8",
        "--fixed-bandwidth-gbs",
        "1000",
        "--batch-sizes",
        "8",
        "--input-seq",
        "256",
        "--output-seq",
        "8",
        "--objectives",
        "ttft,tps-per-device,tps-per-user",
        "--serving",
        "both",
        "--recheck",
        "0",
        "--storage",
        store,
        "--study",
        "s1",
    ]
    assert main(argv) == 0 and main(argv) == 0  # the second run replaces its own study
    study = optuna.load_study(study_name="s1-serving", storage=open_storage(store))
    assert study.metric_names == ["ttft_seconds", "tps_per_device", "tps_per_user"]
    modes = {t.params["serving"] for t in study.trials}
    assert modes == {"aggregated", "disaggregated"}
    dis = [t for t in study.trials if t.params["serving"] == "disaggregated"]
    assert {"prefill_tp", "decode_batch_size", "decode_workers"} <= set(dis[0].params)
    # a user's own study of that name is never replaced
    optuna.create_study(study_name="s2-serving", storage=open_storage(store))
    capsys.readouterr()
    assert main([*argv[:-1], "s2"]) == 2
    assert "is not the serving comparison" in capsys.readouterr().err


def _keys(doc) -> set[str]:
    if isinstance(doc, dict):
        return set(doc) | {k for v in doc.values() for k in _keys(v)}
    if isinstance(doc, list):
        return {k for v in doc for k in _keys(v)}
    return set()


def test_serving_document_is_si_and_the_study_carries_constraints(tmp_path, capsys):
    """``serving`` in --json: seconds, never ms; the -serving study's trials carry the SLA
    constraint values the dashboard reads, equal to the relative excess over each limit."""
    import optuna

    from plena_opt.search.storage.storage import open_storage

    store = str(tmp_path / "s.log")
    argv = ["search", "--model", "llama-3.2-1b", "--noc", "illustrative_gpu_node_8",
            "--fixed-bandwidth-gbs", "1000", "--batch-sizes", "8", "--input-seq", "256",
            "--output-seq", "8", "--objectives", "ttft,tps-per-device,tps-per-user",
            "--serving", "both", "--max-tpot-ms", "40", "--max-ttft-ms", "400", "--recheck",
            "1", "--samples", "50", "--storage", store, "--study", "si", "--json"]  # fmt: skip
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out.split("\nchosen plan")[0])
    serving = doc["serving"]
    keys = _keys(serving)
    assert not {k for k in keys if k.endswith("_ms") or "_ms_" in k}, keys
    assert {"ttft_seconds", "tpot_seconds", "kv_transfer_seconds"} <= keys
    assert serving["sla"] == {"max_ttft_seconds": 0.4, "max_tpot_seconds": 0.04,
                              "min_tps_per_seq": None}  # fmt: skip
    e = serving["comparison"]["disaggregated"]["front"][0]
    assert e["tps_per_user"] == pytest.approx(1 / e["tpot_seconds"], rel=1e-12)
    v = serving["verdicts"][0]
    assert 0 < v["ttft_seconds"] < 10 and 0 < v["tpot_seconds"] < 1
    study = optuna.load_study(study_name="si-serving", storage=open_storage(store))
    assert study.user_attrs["constraints"] == ["max_ttft", "max_tpot"]
    for t in study.trials:
        ttft, tpot = t.user_attrs["ttft_seconds"], t.user_attrs["tpot_seconds"]
        want = [(ttft - 0.4) / 0.4, (tpot - 0.04) / 0.04]
        assert t.system_attrs["constraints"] == pytest.approx(want, rel=1e-12)
        assert t.system_attrs["constraints:max_tpot"] == pytest.approx(want[1], rel=1e-12)
        assert all(c <= 0 for c in t.system_attrs["constraints"])  # front plans meet the SLA


def test_every_real_catalog_model_has_its_hugging_face_id():
    from plena_opt.api import engine_model
    from plena_opt.models.catalog import list_models, model_info

    for name in list_models():
        if model_info(name).get("origin") == "fixture":
            continue
        org, _, repo = engine_model(name, None).partition("/")
        assert org and repo, name
