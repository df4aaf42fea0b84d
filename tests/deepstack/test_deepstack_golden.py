"""deepstack against the reference's golden vectors (../shared/golden).

Tolerance: relative 1e-9, as golden/README.md prescribes for replaying the reference's values
(its own parity tests use 1e-12; 1e-9 absorbs summation-order differences in energy totals).
"""

from __future__ import annotations

import math

import deepstack as ds
import numpy as np
import pytest

from tests.conftest import load_golden

REL = 1e-9
COLLECTIVES = load_golden("collectives")
NETWORKS: dict[str, ds.Network] = {}


def _net(key: str) -> ds.Network:
    if key not in NETWORKS:
        NETWORKS[key] = ds.Network(ds.load_noc_profile(COLLECTIVES["nocs"][key]["profile"]))
    return NETWORKS[key]


def _scheme(s: dict) -> ds.ParallelScheme:
    return ds.ParallelScheme(
        **{k: s[k] for k in ("tp", "ep", "sp", "cp", "dp", "pp")}, ep1=s["ep1"], ep2=s["ep2"]
    )


def _close(mine: float | None, gold: float | None) -> bool:
    if gold is None or mine is None:
        return mine is gold
    return math.isclose(mine, gold, rel_tol=REL, abs_tol=0.0)


def _case_id(case: dict) -> str:
    i = case["inputs"]
    s = "-".join(f"{k}{v}" for k, v in i["scheme"].items() if v not in (1, None) and "ep" != k[:2])
    return f"{case['collective']}-{i['noc']}-{s}-{i.get('dim', '')}-{i.get('bytes', '')}"


@pytest.mark.parametrize("case", COLLECTIVES["cases"], ids=_case_id)
def test_collective_case(case: dict) -> None:
    inp, out = case["inputs"], case["outputs"]
    net, scheme = _net(inp["noc"]), _scheme(inp["scheme"])
    kind = case["collective"]
    if kind in ("all_reduce", "all_gather"):
        assert scheme.size(inp["dim"]) == inp["group_size"]
        got = getattr(net, kind)(scheme, inp["dim"], inp["bytes"])
        assert got.algorithm == out["algorithm"]
        assert set(got.candidates) == set(out["candidates"])
        for name, gold in out["candidates"].items():
            mine = got.candidates[name]
            if gold is None:
                assert mine is None, name
                continue
            for key in ("hop_seconds", "link_seconds", "seconds", "noc_energy_pj"):
                assert _close(getattr(mine, key), gold[key]), (name, key)
    elif kind == "pipeline_p2p":
        got = net.pipeline_p2p(scheme, inp["bytes"])
        assert _close(got.noc_energy_pj_all_boundaries, out["noc_energy_pj_all_boundaries"])
        assert len(got.boundaries) == len(out["boundaries"])
        for mine, gold in zip(got.boundaries, out["boundaries"], strict=True):
            assert mine.from_stage == gold["from_stage"]
            for key in ("hop_seconds", "link_seconds", "noc_energy_pj"):
                assert _close(getattr(mine, key), gold[key]), key
    else:
        routing = inp["routing"]
        rows = None
        if routing["mode"] == "balanced":
            rows = ds.moe.balanced_rows(inp["tokens"], inp["num_experts"], inp["top_k"])
        elif routing["mode"] == "random":
            rows = np.asarray(routing["rows"])
        assert inp["tokens"] == inp["micro_batch"] * inp["seq"]
        got = net.ep_all_to_all(
            scheme,
            bytes_per_token=inp["bytes_each_token"],
            num_experts=inp["num_experts"],
            top_k=inp["top_k"],
            micro_batch=inp["micro_batch"],
            seq=inp["seq"],
            imbalance=inp["imbalance"],
            rows=rows,
        )
    for key in ("hop_seconds", "link_seconds", "seconds", "noc_energy_pj"):
        if key in out:
            assert _close(getattr(got, key), out[key]), key


def test_describe_matches_golden_noc_field() -> None:
    """``NocProfile.describe()`` equals the golden ``noc`` field (provenance paths aside)."""
    dist = load_golden("distributed")
    seen: dict[str, dict] = {}
    for case in dist["cases"]:
        seen.setdefault(case["inputs"]["noc"], case["output"]["noc"])
    assert len(seen) >= 5
    for key, gold in seen.items():
        mine = ds.load_noc_profile(dist["nocs"][key]["profile"]).describe()
        gold_prov = dict(gold.pop("provenance"))
        mine_prov = mine.pop("provenance")
        assert mine == gold, key
        gold_prov.pop("profile_path", None)
        gold_prov.pop("profile_sha256", None)
        assert mine_prov == gold_prov


@pytest.mark.parametrize(
    ("n", "groups", "energy"), [(1, 1, True), (8, 1, True), (32, 4, True), (8, 1, False)]
)
def test_switch_noc_matches_fixture(n: int, groups: int, energy: bool) -> None:
    dist = load_golden("distributed")
    key = f"switch_noc({n},{groups}{'' if energy else ',noenergy'})"
    gold = ds.load_noc_profile(dist["nocs"][key]["profile"])
    mine = ds.switch_noc(n, groups, energy=energy)
    assert mine.describe() == gold.describe()
    assert mine.levels == gold.levels


def test_shipped_profiles_hash_like_reference() -> None:
    """The shipped example JSON files are byte-identical to the reference's (same SHA-256)."""
    dist = load_golden("distributed")
    for case in dist["cases"]:
        prov = case["output"]["noc"]["provenance"]
        if "profile_sha256" in prov:
            mine = ds.load_noc_profile(case["output"]["noc"]["name"])
            assert mine.provenance["profile_sha256"] == prov["profile_sha256"]


def test_invalid_noc_profiles_match_reference_messages() -> None:
    cases = [c for c in load_golden("invalid_plans")["cases"] if "noc_profile" in c["inputs"]]
    assert len(cases) >= 10
    for case in cases:
        etype = {"ValueError": ValueError, "TypeError": TypeError}[case["error_type"]]
        with pytest.raises(etype) as info:
            ds.load_noc_profile(case["inputs"]["noc_profile"])
        assert str(info.value) == case["message"], case["case"]
        assert isinstance(info.value, ds.ProfileError)
        assert info.value.field
