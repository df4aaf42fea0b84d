"""Use case: the launch bundle of a plan, a deployment or a stored trial (``plena-opt export``).

``stored_trial(storage, study, number)`` reads the key and the problem of a stored trial (a
search study's ``point_key``, a serving comparison's deployment ``key``); ``engine_model``
turns a problem's model into the id the engines load (the catalog's Hugging Face id, or the
``model_path`` directory)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from plena_opt.errors import PlenaInputError, PlenaNotFoundError


@dataclass(frozen=True)
class StoredTrial:
    """A stored trial's export key and the problem its study searched (``ProblemSpec``
    identity: ``model``, ``model_path``, ``input_seq``, ``output_seq``, ``precision``, …)."""

    study: str
    number: int
    key: str
    problem: dict[str, Any]


def stored_trial(storage: str, study: str, number: int) -> StoredTrial:
    """Trial ``number`` of ``study`` in ``storage``; its key and the study's problem."""
    from plena_opt.search.record import POINT_ATTR
    from plena_opt.search.serving.serving_store import OWNER_ATTR
    from plena_opt.search.storage.storage import (
        committed_view,
        load_existing_study,
        open_storage,
        storage_exists,
    )

    if not storage_exists(storage):
        raise PlenaNotFoundError("storage", f"--storage {storage}: no study store there")
    store = open_storage(storage)
    with committed_view(store):
        st = load_existing_study(study, store)
        trials = {t.number: t for t in st.get_trials(deepcopy=False)}
        if number not in trials:
            raise PlenaNotFoundError(
                "trial", f"--trial {number}: study {study!r} has trials 0 to {len(trials) - 1}"
            )
        attrs = trials[number].user_attrs
        key = attrs.get(POINT_ATTR) or attrs.get("key")
        if not key:
            raise PlenaInputError("trial", f"--trial {number}: that trial scored no plan")
        owner = st.user_attrs.get(OWNER_ATTR)
        problem = st.user_attrs.get("problem")
        if problem is None and owner:
            problem = load_existing_study(owner, store).user_attrs.get("problem")
    return StoredTrial(study, number, str(key), dict(problem or {}))


def engine_model(model: str | None, model_path: str | None) -> str:
    """The model id the engines load: ``model_path`` as given, else the catalog model's
    Hugging Face id (``hf_id`` in ``plena_opt/models/catalog.json``)."""
    if model_path:
        return model_path
    if not model:
        raise PlenaInputError(
            "model", "export needs --model NAME, --model-path DIR or --engine-model ID"
        )
    from plena_opt.models.catalog import list_models, model_info, resolve_model_id

    if model not in list_models():
        if resolve_model_id(model) is not None:  # a Hugging Face id of a catalog model
            return model
        raise PlenaInputError("model", f"--model {model!r} is not a catalog model")
    hf_id = model_info(model).get("hf_id")
    if not hf_id:
        raise PlenaInputError(
            "model",
            f"--model {model}: a fictional fixture with no Hugging Face id; give --engine-model "
            "ID or --model-path DIR",
        )
    return str(hf_id)


def priced_budgets(chip: str) -> tuple[tuple[str, int], ...]:
    """(engine, step token budget) of each engine's default scheduler on GPU ``chip``
    (``serving.engines``: what estimate and search price under load); empty for a chip without
    HBM (a PLENA chip: no engine). An unknown name raises naming it."""
    from plena_opt.chip import load_chip
    from plena_opt.serving import ENGINES, engine_model

    hbm = getattr(load_chip(chip), "hbm", None)
    if hbm is None:
        return ()
    return tuple(
        (e, engine_model(e, float(hbm.capacity_bytes.value)).budget_tokens) for e in ENGINES
    )


def export_moe(chip: Any, model: Any, model_path: str | None = None,
               moe_kernel: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The ``ExportSpec`` fields that select the MoE kernel a plan's experts were priced on
    (``chip``, ``checkpoint_precision``, ``moe_kernel``; ``chip.gpu.moe_kernels``) and each
    engine's priced step budget on a named chip (``budgets``): empty where the chip or model is
    not a named one (an inline document) or not known."""
    from plena_opt.chip.gpu.moe_kernels import check_moe_kernel

    out: dict[str, Any] = {}
    if moe_kernel is not None:
        out["moe_kernel"] = check_moe_kernel(moe_kernel)
    if isinstance(chip, str):
        out["budgets"] = priced_budgets(chip)
    if not isinstance(chip, str) or not (isinstance(model, str) or model_path):
        return out
    from plena_opt.models.catalog import load_model

    try:
        spec = load_model(None if model_path else model, model_path)
    except (PlenaInputError, ValueError, OSError):
        return out  # the model the engines load is named elsewhere; no kernel is resolved
    return {**out, "chip": chip, "checkpoint_precision": spec.checkpoint_precision}
