"""vLLM's async (overlap) scheduling by version (``serving.vllm_async``), the default engine that
follows it, and the launch export that must not claim otherwise."""

from __future__ import annotations

import pytest

from plena_opt.errors import PlenaInputError
from plena_opt.serving import engine_model
from plena_opt.serving.engines import VERSIONS
from plena_opt.serving.vllm_async import vllm_async, vllm_async_default, vllm_version

GIB = 1 << 30


@pytest.mark.parametrize(
    ("version", "pp1", "pp2"),
    [("0.11.2", False, False), ("0.12.0", False, False), ("0.13.0", False, False),
     ("0.13.2", False, False), ("0.14.0", True, False), ("0.14.1", True, False),
     ("0.15.0", True, True), ("0.15.1", True, True), ("0.18.0", True, True),
     ("0.34.0", True, True), ("v0.11.2", False, False), ("0.14.0.post1", True, False),
     ("0.15.1+cu129", True, True), ("1.0", True, True)],
)  # fmt: skip
def test_default_by_version_and_pipeline_stages(version: str, pp1: bool, pp2: bool) -> None:
    # off before 0.14.0; 0.14.x resolves it off with pipeline_parallel_size > 1; on from 0.15.0
    assert vllm_async_default(version, 1) is pp1
    assert vllm_async_default(version, 2) is pp2
    assert vllm_async_default(version, 4) is pp2


@pytest.mark.parametrize("bad", ["", "x", "0.14.0rc1", "0.15.0.dev3", "0.14.0-1", "14", "0.x.1"])
def test_a_malformed_or_pre_release_version_is_refused_naming_the_field(bad: str) -> None:
    assert vllm_version("0.14") == vllm_version(" v0.14.0 ") == (0, 14, 0)  # N.N is a release
    with pytest.raises(PlenaInputError) as exc:
        vllm_async_default(bad, 1)
    assert exc.value.field == "backend_version"
    with pytest.raises(PlenaInputError) as exc:
        vllm_async_default("0.15.1", 0)
    assert exc.value.field == "pp"


def test_the_launch_flag_and_a_missing_version() -> None:
    assert vllm_async(None, 1, flag=True)  # the flag at pp 1: on in every release with it
    assert vllm_async("0.11.2", 1, flag=True)
    assert vllm_async("0.15.1", 2, flag=True)
    with pytest.raises(PlenaInputError, match="pipeline_parallel_size") as exc:
        vllm_async("0.14.0", 2, flag=True)  # 0.14.x raises on the flag with PP
    assert exc.value.field == "backend_version"
    for flag in (False, True):  # the answer needs the version: refused, never guessed
        with pytest.raises(PlenaInputError) as exc:
            vllm_async(None, 2 if flag else 1, flag=flag)
        assert exc.value.field == "backend_version"


def test_the_default_vllm_engine_overlaps_as_its_version_does_at_every_pp() -> None:
    assert VERSIONS["vllm"] == "0.34.0"
    for hbm in (40 * GIB, 80 * GIB, 180 * GIB):
        assert engine_model("vllm", hbm).overlap_schedule
    # one engine model serves every plan of a search (serving.pipeline keeps the flag): the
    # modelled version must run it at every pipeline size, as 0.34.0 does
    assert all(vllm_async_default(VERSIONS["vllm"], pp) for pp in (1, 2, 4, 8))


def test_the_vllm_launch_claims_no_other_scheduling_than_the_priced_one() -> None:
    from plena_opt.export import ENGINES, ExportSpec, plan_bundle

    assert ENGINES["vllm"]["version"] == VERSIONS["vllm"]  # the launch runs the priced defaults
    spec = ExportSpec(model="m/m", input_len=8, output_len=8, gpus_per_node=8)
    for key in ("tp4-ep1-dp1-pp1-cp1-replace-none-b16", "tp4-ep1-dp1-pp2-cp1-replace-none-b16",
                "tp8-ep1-dp1-pp2-cp1-replace-none-b16"):  # the last spans two nodes  # fmt: skip
        cmds = [c for c in plan_bundle("vllm", key, spec) if c.role == "serve"]
        assert cmds and not any(c.refused for c in cmds)
        for c in cmds:
            # the default (on) is what was priced: no flag either way, and no Ray executor
            # (Executor.supports_async_scheduling False: async scheduling off under Ray)
            assert not {"--async-scheduling", "--no-async-scheduling"} & set(c.argv)
            assert "--distributed-executor-backend" not in c.argv
