"""Launch bundles as files: one folder per plan or deployment (``search --export-dir``,
``plena-opt export --out-dir``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError
from plena_opt.export.bundle import bundle
from plena_opt.export.launch import ExportSpec, LaunchConfig


def write_bundle(folder: Path, launches: list[LaunchConfig]) -> list[str]:
    """``<engine>-<role>[-nodeK].sh`` per runnable command, ``<engine>-REFUSED.txt`` per engine
    that cannot run the plan as priced, and ``launch.json`` with all of them."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for c in launches:
        if c.refused:
            path = folder / f"{c.engine}-REFUSED.txt"
            path.write_text("\n".join(c.refused) + "\n")
        else:
            path = folder / f"{c.name}.sh"
            path.write_text(c.script())
        paths.append(str(path))
    doc = folder / "launch.json"
    doc.write_text(json.dumps([c.to_dict() for c in launches], indent=2) + "\n")
    return [*paths, str(doc)]


def write_deployment(folder: Path, key: str, spec: ExportSpec, launches: list[LaunchConfig],
                     catalog_model: str | None = None, gpu: str | None = None) -> str:  # fmt: skip
    """``deployment.json``: what the bundle deploys and measures (the plan key, model, GPU,
    formats, lengths, the engines that run it and their benchmark result files), read back by
    ``plena-opt validate --measurements RESULT --bundle DIR``. ``gpu``: None when not known."""
    from plena_opt.export.launch import parse_deployment_key, parse_point_key

    run = sorted({c.engine for c in launches if not c.refused})
    results = {}
    for c in launches:
        if c.role == "bench" and "--result-filename" in c.argv:
            results[c.engine] = c.argv[c.argv.index("--result-filename") + 1]
        elif c.role == "bench" and "--output-file" in c.argv:
            results[c.engine] = c.argv[c.argv.index("--output-file") + 1]
    split = parse_deployment_key(key)
    batch = None if split else parse_point_key(key)[1]
    doc = {
        "kind": "plena-opt deployment",
        "version": 1,
        "key": key,
        "disaggregated": split is not None,
        "model": spec.model,
        "catalog_model": catalog_model,
        "gpu": gpu,
        "precision": spec.precision,
        "kv_precision": spec.kv_precision,
        "input_seq_len": spec.input_len,
        "output_seq_len": spec.output_len,
        "concurrency": batch,
        "gpus_per_node": spec.gpus_per_node,
        "memory_fraction": spec.memory_fraction,
        "engines": run,
        "refused_engines": sorted({c.engine for c in launches if c.refused}),
        "bench_result_files": results,
    }
    path = folder / "deployment.json"
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return str(path)


def write_exports(result: Any, folder: str | Path, *, top_k: int, spec: ExportSpec) -> list[str]:
    """Bundles of the first ``top_k`` front plans (``plan0``, …) and of the disaggregated
    front's deployments (``disaggregated0``, …); the paths written."""
    root = Path(folder)
    written: list[str] = []
    try:
        for i, e in enumerate(result.front[:top_k]):
            written += write_bundle(root / f"plan{i}", bundle(e.key, spec))
        dis = result.serving.get("comparison", {}).get("disaggregated", {}).get("front", [])
        for i, e in enumerate(dis[:top_k]):
            written += write_bundle(root / f"disaggregated{i}", bundle(e["key"], spec))
    except OSError as exc:
        raise PlenaInputError("export_dir", f"--export-dir {folder}: {exc.strerror}") from None
    return written
