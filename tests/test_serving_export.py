"""Launch configs (issue 16): flags from the one data file, unsupported features named."""

from __future__ import annotations

import json

import pytest

from plena_opt.cli.main import main
from plena_opt.errors import PlenaInputError
from plena_opt.estimate import Plan
from plena_opt.export import ENGINES, export_plan, parse_plan_key


def test_every_written_flag_is_in_the_data_file():
    plan, batch = parse_plan_key("tp4-ep1-dp2-pp2-cp1-replace-none-b64")
    for engine in ("vllm", "sglang"):
        c = export_plan(engine, plan, batch, model="m", max_len=3072, memory_fraction=0.8)
        known = set(ENGINES[engine]["flags"].values()) | {"--model-path"}
        assert {a for a in c.argv if a.startswith("--")} <= known
        assert not c.cannot_express
    v = export_plan("vllm", plan, batch, model="m", max_len=3072, memory_fraction=0.8).argv
    i = v.index
    assert v[i("--tensor-parallel-size") + 1] == "4"
    assert v[i("--pipeline-parallel-size") + 1] == "2"
    assert v[i("--data-parallel-size") + 1] == "2"
    assert v[i("--max-num-seqs") + 1] == "32"  # 64 sequences over 2 replicas
    assert v[i("--gpu-memory-utilization") + 1] == "0.8"


def test_cp_and_keep_are_named_not_written():
    c = export_plan("vllm", Plan(tp=2, cp=2), 8, model="m", max_len=10)
    assert any("context parallelism" in x for x in c.cannot_express)
    assert not any("context" in a for a in c.argv)
    k = export_plan("sglang", Plan(tp=2, ep=2, moe_tp_mode="keep"), 8, model="m", max_len=10)
    assert any("keep" in x for x in k.cannot_express)
    v = export_plan("vllm", Plan(tp=2, ep=2), 8, model="m", max_len=10)
    assert "--enable-expert-parallel" in v.argv and not v.cannot_express


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
            "--out-dir",
            str(tmp_path),
        ]
    )
    assert rc == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sglang-decode.sh", "sglang-prefill.sh"]
    assert "--disaggregation-mode decode" in (tmp_path / "sglang-decode.sh").read_text()
    capsys.readouterr()
    assert main(["export", "tp2-ep1-dp1-pp1-cp1-replace-none-b8"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {d["engine"] for d in doc} == {"vllm", "sglang"}


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
    assert sorted(p.name for p in (tmp_path / "plan0").iterdir()) == [
        "launch.json",
        "sglang-serve.sh",
        "vllm-serve.sh",
    ]
    dis = sorted(p.name for p in (tmp_path / "disaggregated0").iterdir())
    assert dis == [
        "launch.json",
        "sglang-decode.sh",
        "sglang-prefill.sh",
        "vllm-decode.sh",
        "vllm-prefill.sh",
    ]
    assert "instance(s)" in (tmp_path / "disaggregated0" / "vllm-decode.sh").read_text()


def test_comparison_is_stored_as_a_study_and_never_overwrites_a_users(tmp_path, capsys):
    import optuna

    from plena_opt.search.storage import open_storage

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

    from plena_opt.search.storage import open_storage

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
