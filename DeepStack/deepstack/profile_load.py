"""Loading a NoC profile by name, path or dict: the shipped JSON profiles, the Python presets
and ``<one-node profile>@<nodes>`` multi-node names (network-model.md §1.2, §1.3).

Above ``profile`` (the schema and its validation), ``presets`` and ``gpu_nodes``, which build
profiles, so none of them imports another in a cycle.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path
from typing import Any

from .errors import ProfileError, ProfileTypeError
from .gpu_nodes import multi_node
from .presets import PRESETS
from .profile import NocProfile, profile_from_dict


def _builtin_dir():
    return resources.files("deepstack") / "profiles"


def _builtin_json_names() -> list[str]:
    return sorted(p.name[:-5] for p in _builtin_dir().iterdir() if p.name.endswith(".json"))


def list_noc_profiles() -> list[str]:
    """Names accepted by :func:`load_noc_profile`: shipped JSON profiles and Python presets."""
    return sorted(set(_builtin_json_names()) | set(PRESETS))


def load_noc_profile(source: str | Path | dict[str, Any] | NocProfile) -> NocProfile:
    """Load a profile from a built-in name, a JSON file path or a dict (validated, §1.2).

    Loading from a file stamps ``provenance.profile_path`` and ``profile_sha256`` (of the raw
    bytes). Unknown names raise :class:`ProfileError` listing the valid ones.
    """
    if isinstance(source, NocProfile):
        return source
    if isinstance(source, dict):
        return profile_from_dict(source)
    if not isinstance(source, str | Path):
        raise ProfileTypeError("profile", "NoC profile must be a name, a path or a dict")
    text = str(source)
    if text in PRESETS:
        return PRESETS[text]()
    if "@" in text and text.rsplit("@", 1)[1].isdigit():  # "<one-node profile>@<nodes>"
        base, nodes = text.rsplit("@", 1)
        return multi_node(load_noc_profile(base), int(nodes))
    if text in _builtin_json_names():
        data = (_builtin_dir() / f"{text}.json").read_bytes()
        return _from_bytes(data, f"deepstack/profiles/{text}.json")
    path = Path(text)
    if path.suffix == ".json" or path.exists():
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ProfileError("profile", f"cannot read NoC profile {text!r}: {exc}") from exc
        return _from_bytes(data, text)
    raise ProfileError(
        "profile",
        f"unknown NoC profile {text!r}; choose one of: {', '.join(list_noc_profiles())} "
        "or give a JSON path",
    )


def _from_bytes(data: bytes, path: str) -> NocProfile:
    try:
        raw = json.loads(data)
    except UnicodeDecodeError:
        raise ProfileError(
            "profile", f"NoC profile {path!r} is not UTF-8 text (a binary file?)"
        ) from None
    except json.JSONDecodeError as exc:
        raise ProfileError("profile", f"NoC profile {path!r} is not valid JSON: {exc}") from exc
    except RecursionError:
        raise ProfileError(
            "profile", f"NoC profile {path!r} is nested too deeply to be a NoC profile"
        ) from None
    extra = {"profile_path": path, "profile_sha256": hashlib.sha256(data).hexdigest()}
    return profile_from_dict(raw, extra)
