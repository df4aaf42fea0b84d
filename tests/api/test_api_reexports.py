"""The modules of ``plena_opt.api`` that name what a front end needs from below (issue 27): every
lazily re-exported name resolves to the very object of the module that defines it, and a name
they do not offer fails as an import error (a front end then cannot start on a typo)."""

from __future__ import annotations

import importlib

import pytest

FACADES = ["catalog", "launch", "network", "search_io", "simulation_io", "studies"]


@pytest.mark.parametrize("facade", FACADES)
def test_every_reexported_name_is_the_defining_modules_object(facade):
    module = importlib.import_module(f"plena_opt.api.{facade}")
    assert module._EXPORTS, facade
    for name, source in module._EXPORTS.items():
        assert getattr(module, name) is getattr(importlib.import_module(source), name), name
    assert set(module._EXPORTS) <= set(module.__all__)
    for name in module.__all__:  # the use cases defined there too
        assert getattr(module, name) is not None, name


def test_an_unknown_name_is_an_import_error():
    with pytest.raises(ImportError, match="no_such_name"):
        exec("from plena_opt.api.studies import no_such_name", {})


def test_the_server_warm_list_names_only_importable_modules():
    from plena_opt.api import warm

    warm.import_all()
    assert "plena_opt.api.studies" in warm.MODULES
