"""What a user expects of any CLI, shared by every ``plena-opt`` subcommand.

* ``did_you_mean(word, choices)`` / ``suggest_in_message(msg)``: difflib suggestions for unknown
  flags, subcommands, choices and catalog names (models, NoC / memory / chip profiles).
* ``env_default(name)``: defaults from ``PLENA_OPT_STORAGE`` / ``PLENA_OPT_SERVER`` (a flag
  given on the command line wins over its environment variable).
* ``server_target(text)``: ``HOST`` → ``HOST:50051`` (the default gRPC port).
* ``quiet_broken_pipe()``: a closed stdout (``plena-opt … | head``) ends the command quietly with
  the shell's SIGPIPE status ``EXIT_BROKEN_PIPE`` (141 = 128 + SIGPIPE).
* ``DefaultsFormatter``: ``--help`` shows each flag's default.

Only the standard library is imported here (``plena-opt --help`` stays fast).
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable, Iterable

ENV_STORAGE = "PLENA_OPT_STORAGE"
ENV_SERVER = "PLENA_OPT_SERVER"
DEFAULT_SERVER_PORT = 50051
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for `yes | head`

__all__ = [
    "DEFAULT_SERVER_PORT",
    "ENV_SERVER",
    "ENV_STORAGE",
    "EXIT_BROKEN_PIPE",
    "DefaultsFormatter",
    "did_you_mean",
    "env_default",
    "quiet_broken_pipe",
    "server_target",
    "suggest_in_message",
    "unknown_flag_hint",
]


# difflib similarity a suggestion needs. Its default 0.6 offered '--plot' for `search --tp` (ratio
# 0.6 exactly); 0.7 keeps typos and truncations ('--tpp', 'serch', 'mixtral' → 'mixtral-8x7b').
SUGGEST_CUTOFF = 0.7


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``choices`` to ``word``, or ``""``."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=SUGGEST_CUTOFF)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _catalog(kind: str) -> list[str]:
    """The built-in names of one catalog (imported only when an error needs them)."""
    if kind == "model":
        from plena_opt.api.catalog import list_models

        return list_models()
    if kind == "NoC profile":
        from plena_opt.api.catalog import list_noc_profiles

        return list_noc_profiles()
    if kind == "memory profile":
        from plena_opt.api.catalog import list_memory_profiles

        return list_memory_profiles()
    from plena_opt.api.catalog import list_chip_profiles

    return list_chip_profiles()


_UNKNOWN_NAME = re.compile(r"unknown (model|NoC profile|memory profile|chip profile) '([^']*)'")
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from ([^)]*)\)")


def suggest_in_message(msg: str, lister: Callable[[str], list[str]] = _catalog) -> str:
    """``msg`` ending with a did-you-mean for an unknown catalog name or argparse choice."""
    if "did you mean" in msg:
        return msg
    m = _UNKNOWN_NAME.search(msg)
    if m:
        try:
            names = lister(m.group(1))
        except Exception:  # a broken catalog must not hide the original error
            return msg
        return msg + _tail(did_you_mean(m.group(2), names))
    m = _INVALID_CHOICE.search(msg)
    if m:
        choices = [c.strip().strip("'") for c in m.group(2).split(",")]
        return msg + _tail(did_you_mean(m.group(1), choices))
    return msg


def _tail(hint: str) -> str:
    """`` (did you mean 'x'?)`` → ``; did you mean 'x'?`` (appended: the message stays as the
    reference words it, the suggestion follows)."""
    return hint.replace(" (", "; ", 1).removesuffix(")")


def unknown_flag_hint(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: --x (did you mean '--y'?)`` for the flags ``parser`` lacks."""
    flags = [s for a in parser._actions for s in a.option_strings]  # noqa: SLF001 (argparse API)
    words = []
    for word in extras:
        hint = did_you_mean(word.split("=", 1)[0], flags) if word.startswith("-") else ""
        words.append(word + hint)
    return "unrecognized arguments: " + " ".join(words)


def env_default(name: str) -> str | None:
    """The value of environment variable ``name``; unset or empty → None."""
    return os.environ.get(name) or None


def server_target(text: str) -> str:
    """A gRPC target: ``HOST`` → ``HOST:50051``; ``HOST:PORT``, ``[v6]:PORT`` and URIs as given."""
    text = text.strip()
    if "://" in text or text.startswith(("unix:", "dns:", "ipv4:", "ipv6:")):
        return text
    if text.startswith("["):
        return text if "]:" in text else f"{text}:{DEFAULT_SERVER_PORT}"
    if text.count(":") > 1:  # a bare IPv6 address
        return f"[{text}]:{DEFAULT_SERVER_PORT}"
    if ":" in text:
        return text
    return f"{text}:{DEFAULT_SERVER_PORT}"


def quiet_broken_pipe() -> int:
    """After a ``BrokenPipeError`` on stdout: silence further writes, return 141."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (tests)
        pass
    return EXIT_BROKEN_PIPE


class DefaultsFormatter(argparse.HelpFormatter):
    """Appends ``(default: X)`` to a flag's help unless the help already states its default
    or the flag is a switch (``store_true``) or takes no default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        if not action.option_strings or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)"
