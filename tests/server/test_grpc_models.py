"""gRPC with inline model configs of the new families: priced, or INVALID_ARGUMENT by field."""

from __future__ import annotations

import grpc
import pytest

from plena_opt.models import builtin_config


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    from plena_client import PlenaClient
    from plena_server.app import start_server

    path = tmp_path_factory.mktemp("grpc-models") / "s.log"
    running = start_server("127.0.0.1", 0, str(path), workers=2)
    try:
        with PlenaClient(f"127.0.0.1:{running.port}") as c:
            yield c
    finally:
        running.drain(1)


def test_inline_mla_config_is_priced_with_its_latent_cache(client) -> None:
    from plena_client import pb, system_spec

    cfg = builtin_config("deepseek-v3")
    reply = client.estimate(system_spec(cfg, "illustrative_gpu_node_8"), pb.Plan(tp=8))
    m = reply.metrics
    assert m.tps > 0
    held = 2048 + 1024  # default workload: input 2048, output 1024
    per_layer = 16 * held * (512 + 64) * 1.125  # batch 16, MXFP8 KV, replicated over tp
    assert m.kv_cache_bytes_per_device == pytest.approx(61 * per_layer, rel=1e-9)


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"index_topk": 2048}, "index_n_heads"),  # DSA without its indexer size
        ({"num_hidden_layers": 10**9}, "num_hidden_layers"),
        ({"n_routed_experts": 10**30}, "n_routed_experts"),
    ],
)
def test_inline_unmodelled_or_huge_configs_are_invalid_argument(client, patch, field) -> None:
    from plena_client import PlenaRpcError, pb, system_spec

    cfg = {**builtin_config("deepseek-v3"), **patch}
    with pytest.raises(PlenaRpcError) as err:
        client.estimate(system_spec(cfg, "illustrative_gpu_node_8"), pb.Plan(tp=8))
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.field.endswith(field)
