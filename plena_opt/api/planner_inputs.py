"""The planner page's inputs beyond shipped names: a model directory on the machine running the
UI (a folder holding a Hugging Face ``config.json``, read by the reader ``--model-path`` uses) and
an uploaded NoC profile (the ``noc_hierarchy`` JSON a ``--noc FILE`` holds, validated as the CLI
validates that file). Bad input raises ``PlenaInputError`` naming the field (``model_dir``,
``noc_document``); sizes are bounded by ``api.limits`` (path characters, config bytes, devices).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from plena_opt.errors import PlenaInputError

if TYPE_CHECKING:
    from plena_opt.api.plan_detail import LoadExtras
    from plena_opt.estimate.problem import ProblemSpec

#: The file names the reproducing command gives an uploaded NoC profile.
UPLOADED_NOC = "noc.json"


def check_model_dir(text: Any) -> str:
    """``text`` if it names a readable directory holding a regular ``config.json`` of at most
    ``MAX_CONFIG_BYTES`` bytes; only that file is read (``ProblemSpec.model_path``)."""
    from plena_opt.api.limits import MAX_CONFIG_BYTES, MAX_PATH_CHARS

    field = "model_dir"
    if not isinstance(text, str) or not text.strip():
        raise PlenaInputError(field, "model_dir: give the path of a folder holding config.json")
    if len(text) > MAX_PATH_CHARS or "\x00" in text:
        raise PlenaInputError(field, f"model_dir: at most {MAX_PATH_CHARS:,} characters, no NUL")
    folder = Path(text).expanduser()
    shown = repr(text[:200])
    try:
        if not folder.is_dir():
            why = "is not a directory" if folder.exists() else "does not exist on this machine"
            raise PlenaInputError(field, f"model_dir: {shown} {why}")
        config = folder / "config.json"
        if not config.exists():
            raise PlenaInputError(field, f"model_dir: {shown} holds no config.json")
        st = config.stat()
    except OSError as exc:  # a folder we may not enter, a name too long for the file system
        reason = exc.strerror or type(exc).__name__
        raise PlenaInputError(field, f"model_dir: cannot read {shown}: {reason}") from None
    if not stat.S_ISREG(st.st_mode):
        raise PlenaInputError(field, f"model_dir: {shown} holds no config.json file")
    if st.st_size > MAX_CONFIG_BYTES:
        raise PlenaInputError(
            field,
            f"model_dir: config.json is {st.st_size:,} bytes; at most {MAX_CONFIG_BYTES:,}",
        )
    if not os.access(config, os.R_OK):
        raise PlenaInputError(field, f"model_dir: {shown}/config.json is not readable")
    return str(folder)


def check_noc_document(doc: Any, name: Any = None) -> Any:
    """An uploaded NoC profile as an ``InlineDocument`` once it loads (``load_noc_profile``, the
    CLI's ``--noc FILE`` check) with at most ``MAX_DEVICES`` devices."""
    from deepstack import load_noc_profile

    from plena_opt.api.limits import MAX_DEVICES, MAX_NAME_CHARS
    from plena_opt.estimate.problem import InlineDocument

    field = "noc_document"
    if not isinstance(doc, dict):
        raise PlenaInputError(field, "noc_document: a NoC profile JSON object (noc_hierarchy)")
    declared = _declared_devices(doc, MAX_DEVICES)
    if declared > MAX_DEVICES:  # refused before the profile's per-device tables are built
        raise PlenaInputError(
            field, f"noc_document: more than {MAX_DEVICES:,} devices; at most {MAX_DEVICES:,}"
        )
    try:
        noc = load_noc_profile(doc)
    except (ValueError, OSError, TypeError) as exc:
        inner = getattr(exc, "field", None)
        where = f"noc_document.{inner}" if inner else field
        raise PlenaInputError(where, f"noc_document: {exc}") from None
    if noc.num_devices > MAX_DEVICES:
        raise PlenaInputError(
            field, f"noc_document: {noc.num_devices:,} devices; at most {MAX_DEVICES:,}"
        )
    label = str(name or noc.name or "uploaded-noc")[:MAX_NAME_CHARS]
    return InlineDocument(document=doc, name=label)


def _declared_devices(doc: dict[str, Any], top: int) -> int:
    """The devices the layers' shapes multiply to (stops above ``top``; 0 when a shape is not a
    list of integers: the loader then says what is wrong)."""
    layers = doc.get("layers")
    if not isinstance(layers, dict):
        return 0
    n = 1
    for level in layers.values():
        shape = level.get("shape") if isinstance(level, dict) else None
        if not isinstance(shape, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in shape
        ):
            return 0
        for x in shape:
            n *= x
            if n > top:
                return n
    return n


#: Planner fields passed to ``ProblemSpec`` as given (its defaults when absent): EPLB's redundant
#: experts and the analytic model's LM head, overlap policy and clock (they price PLENA chips).
SPEC_OPTIONS = ("eplb_redundant", "include_lm_head", "overlap", "frequency_hz")


def planner_spec(f: Mapping[str, Any]) -> ProblemSpec:
    """The ``ProblemSpec`` of the planner's fields (``search``'s flags); bad input raises naming
    the field."""
    from plena_opt.api.moe_kernel import check_moe_kernel_flag
    from plena_opt.estimate.problem import InlineDocument, ProblemSpec

    check_moe_kernel_flag(f.get("moe_kernel"))

    doc = f.get("model_document")
    model: Any = f.get("model")
    model_path = None
    if doc is not None:
        if not isinstance(doc, dict):
            raise PlenaInputError("model_document", "model_document: an HF config.json object")
        model = InlineDocument(document=doc, name=str(f.get("model_name") or "custom"))
    elif f.get("model_dir") is not None:
        model, model_path = None, check_model_dir(f.get("model_dir"))
    noc: Any = f.get("noc") or "hgx-h200x8"
    if f.get("noc_document") is not None:
        noc = check_noc_document(f.get("noc_document"), f.get("noc_name"))
    try:
        return ProblemSpec(
            model=model,
            model_path=model_path,
            chip=f.get("chip"),
            noc=noc,
            devices=f.get("devices"),
            input_seq=f.get("input_seq", 2048),
            output_seq=f.get("output_seq", 1024),
            precision=f.get("precision") or None,
            engine=f.get("engine") or None,
            moe_kernel=f.get("moe_kernel") or None,
            routing=check_routing_mode(f.get("routing")),
            kv_precision=f.get("kv_precision") or None,
            **{k: f[k] for k in SPEC_OPTIONS if f.get(k) is not None},
        )
    except ValidationError as exc:
        raise input_error(exc) from exc


def check_routing_mode(routing: Any) -> str:
    """``routing`` (None: ``balanced``) if a built-in MoE routing mode: a trace file path is
    refused, as gRPC refuses it (the page must not read the server's files)."""
    from plena_opt.vocabulary import MOE_ROUTING_MODES

    if routing is None:
        return "balanced"
    if routing not in MOE_ROUTING_MODES:
        raise PlenaInputError(
            "routing",
            f"--routing must be one of {', '.join(MOE_ROUTING_MODES)}; got {str(routing)[:64]!r} "
            "(a routing trace file is read by the CLI only)",
        )
    return routing


#: The planner fields of ``estimate``'s load flags beyond the workload (``LoadExtras``).
LOAD_EXTRAS = ("engine_version", "range_ratio", "speculative", "speculative_method", "acceptance")


def load_extras(f: Mapping[str, Any]) -> LoadExtras:
    """The engine version, lengths' range ratio and speculative setting of the fields, checked
    as ``estimate`` checks ``--engine-version --range-ratio --speculative --speculative-method
    --acceptance`` (each priced under load: it needs ``concurrency`` or ``request_rate``); the
    version is checked against the engine once the problem is loaded (``check_target_engine``)."""
    from plena_opt.api.plan_detail import NO_EXTRAS, LoadExtras
    from plena_opt.api.speculative import speculation
    from plena_opt.api.under_load import check_load

    given = [k for k in LOAD_EXTRAS if f.get(k) is not None]
    if not given:
        return NO_EXTRAS
    if f.get("concurrency") is None and f.get("request_rate") is None:
        flag = "--" + given[0].replace("_", "-")
        raise PlenaInputError(
            given[0], f"{flag} is priced under load: give --concurrency or --request-rate"
        )
    ratio = f.get("range_ratio")
    ratio = 0.0 if ratio is None else ratio
    check_load(f.get("concurrency"), f.get("request_rate"), ratio)
    k, method, rates = f.get("speculative"), f.get("speculative_method"), f.get("acceptance")
    spec = None
    if k is None and (method is not None or rates is not None):
        flag = "--speculative-method" if method is not None else "--acceptance"
        raise PlenaInputError("speculative", f"{flag} needs --speculative K")
    if k is not None:
        spec = speculation(method or "eagle", k, None if rates is None else tuple(rates))
    return LoadExtras(f.get("engine_version"), float(ratio), spec)


def input_error(exc: ValidationError) -> PlenaInputError:
    """The first pydantic error as the CLI words it (``--flag: rule``; ``field`` the name)."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ()) if p != "problem"]
    name = ".".join(loc)
    msg = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
    if not name:
        return PlenaInputError("request", msg)
    return PlenaInputError(name, f"--{name.replace('_', '-')}: {msg}")
