"""Built-in model catalog: Hugging Face configs shipped in ``plena_opt/models/configs``.

``catalog.json`` beside this module records where each config comes from and whether it is an
external addition (not part of the reference's Model_Lib, analytic-model §2.3).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaNotFoundError, PlenaTypeError
from plena_opt.models.checkpoint import (
    ResolvedModel,
    checkpoint_kv_format,
    fp8_static_input,
    nvfp4_attention,
    resolve_hf_id,
)
from plena_opt.models.limits import MAX_NESTING, check_depth
from plena_opt.models.model_spec import ModelSpec


def _package_dir() -> Path:
    return Path(str(resources.files("plena_opt.models")))


@cache
def list_models() -> list[str]:
    """Names of the built-in models, sorted."""
    return sorted(p.stem for p in (_package_dir() / "configs").glob("*.json"))


@cache
def _catalog() -> dict[str, dict[str, Any]]:
    return json.loads((_package_dir() / "catalog.json").read_text())


def model_info(name: str) -> dict[str, Any]:
    """Provenance of a built-in model: ``{source, external, note?}`` (a Hugging Face id gives its
    entry's, with ``hf_id`` the id as given and ``catalog_name`` the entry)."""
    if name not in list_models():
        found = resolve_model_id(name)
        if found is not None:
            row = dict(_catalog().get(found.name, {}))
            return {**row, "hf_id": found.hf_id, "catalog_name": found.name}
    _check_name(name)
    return dict(_catalog().get(name, {"source": "unknown", "external": False}))


def resolve_model_id(model: str) -> ResolvedModel | None:
    """A catalog name or Hugging Face id (quantised variants too: ``nvidia/DeepSeek-R1-NVFP4``)
    → the catalog entry and the checkpoint's weight format; None when it is neither."""
    if model in list_models():
        row = _catalog().get(model, {})
        fmt = _builtin_spec(model).checkpoint_precision
        return ResolvedModel(model, str(row.get("hf_id") or model), fmt)
    return resolve_hf_id(model, _catalog(), list_models())


def _check_name(name: str) -> None:
    if name not in list_models():
        raise PlenaNotFoundError(
            "model", f"unknown model {name!r}; choose one of: {', '.join(list_models())}"
        )


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (or a model directory holding one); errors name the
    path. Nesting deeper than ``MAX_NESTING`` levels is refused, never a RecursionError."""
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        text = path.read_bytes()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise PlenaInputError(
            "model_path", f"cannot read model config {str(path)!r}: {reason}"
        ) from None
    try:
        cfg = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PlenaInputError(
            "model_path", f"model config {str(path)!r} is not valid JSON: {exc}"
        ) from None
    except RecursionError:
        raise PlenaInputError(
            "model_path", f"model config {str(path)!r} is nested deeper than {MAX_NESTING} levels"
        ) from None
    check_depth(cfg, "model_path")
    if not isinstance(cfg, dict):
        raise PlenaTypeError("model_path", f"model config {str(path)!r} must hold a JSON object")
    return cfg


def builtin_config(name: str) -> dict[str, Any]:
    """The shipped Hugging Face config dict of a built-in model (a fresh copy)."""
    _check_name(name)
    return read_config_file(_package_dir() / "configs" / f"{name}.json")


@cache
def _builtin_spec(name: str, checkpoint: str | None = None) -> ModelSpec:
    """The shipped spec (one shared object per name and format), at ``checkpoint`` or the
    catalog's ``checkpoint`` format (the published checkpoint's; else the config's own)."""
    spec = ModelSpec.from_hf_config(builtin_config(name), name)
    row = _catalog().get(name, {})
    fmt = checkpoint or row.get("checkpoint")
    if fmt is None or fmt == spec.checkpoint_precision:
        return spec
    source = (
        "the Hugging Face id's suffix" if checkpoint else "catalog.json: the published checkpoint"
    )
    update = {"checkpoint_precision": fmt, "checkpoint_source": source}
    # the published checkpoint quantises only its routed experts (catalog.json says so, cited in
    # its checkpoint_experts_only_source, where the shipped config abridges quantization_config)
    if fmt == row.get("checkpoint") and row.get("checkpoint_experts_only"):
        update["checkpoint_experts_only"] = True
    return spec.model_copy(update=update)


@cache
def _hf_spec(name: str, checkpoint: str, bf16_attention: str, fp8_static: bool = False,
             kv_format: str | None = None) -> ModelSpec:  # fmt: skip
    """``_builtin_spec`` of a Hugging Face id, with the MLA projections its checkpoint keeps in
    bf16 (``models.checkpoint.nvfp4_attention``; only an MLA model at fp4 keeps any), its
    static fp8 activation scales (``models.checkpoint.fp8_static_input``; an fp8 checkpoint) and
    the KV-cache format it declares (``models.checkpoint.checkpoint_kv_format``)."""
    spec = _builtin_spec(name, checkpoint)
    update: dict[str, object] = {}
    if kv_format is not None:
        update["checkpoint_kv_precision"] = kv_format
    if bf16_attention and spec.is_mla and checkpoint == "fp4":
        update["checkpoint_bf16_attention"] = bf16_attention
    if fp8_static and checkpoint == "fp8":
        update["checkpoint_fp8_static_input"] = True
    return spec.model_copy(update=update) if update else spec


def model_name_from_path(path: str | Path) -> str:
    """The name a model read from ``path`` goes by (``models show``, study names):
    ``…/Llama-3.1-8B/config.json`` → ``Llama-3.1-8B``; ``my-model.json`` → ``my-model``; a folder
    ``…/Qwen2.5-72B`` → ``Qwen2.5-72B`` (its dots are not a file suffix)."""
    path = Path(path)
    if path.is_dir():
        return path.resolve().name or "model"
    if path.name == "config.json" and path.parent.name:
        return path.parent.name
    return path.stem if path.suffix.lower() == ".json" else path.name or "model"


def load_model(name: str | None = None, path: str | Path | None = None) -> ModelSpec:
    """A built-in model by ``name``, or any HF ``config.json`` at ``path`` (give exactly one).

    With ``path``, ``name`` (if given) names the model instead of the file/folder name.
    Raises PlenaNotFoundError for an unknown name, PlenaInputError for a bad file or config.
    """
    if path is not None:
        path = Path(path)
        return ModelSpec.from_hf_config(read_config_file(path), name or model_name_from_path(path))
    if name is None:
        raise PlenaInputError("model", "give a built-in model name or a --model-path config file")
    if not isinstance(name, str):
        raise PlenaTypeError("model", "a model name must be a string")
    if name not in list_models():
        found = resolve_model_id(name)
        if found is not None:  # a Hugging Face id: its entry, at the checkpoint's format
            return _hf_spec(found.name, found.checkpoint_precision, nvfp4_attention(name),
                            fp8_static_input(name), checkpoint_kv_format(name))  # fmt: skip
    _check_name(name)
    return _builtin_spec(name)
