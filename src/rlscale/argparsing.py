"""The argument parser of every rlscale command; at the bottom of the layers, so that any module may import it.

:func:`closest` is how every refusal of a mistyped name (an option, a task id, a config key) finds the one meant.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

CLOSE_ENOUGH = 0.7
"""Least :class:`difflib.SequenceMatcher` ratio of a correction: a typo of ``--num_envs`` is above 0.9; difflib's own
0.6 would answer ``--virtual_local_rank`` with ``--log_all_ranks``."""


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice spelled most like ``word``, or None when none is close (:data:`CLOSE_ENOUGH`)."""
    matches = difflib.get_close_matches(word, list(choices), n=1, cutoff=CLOSE_ENOUGH)
    return matches[0] if matches else None


class OneLineParser(argparse.ArgumentParser):
    """Argument parser whose errors are one line on stderr and exit code 2, as every rlscale command's are; it takes
    no abbreviated option.

    The default prints the whole multi-line usage first, which buries the one line that matters. An unknown option
    is answered with the option spelled most like it (``--num_env``: did you mean ``--num_envs``?).
    """

    help_command: str | None = None
    """Command whose ``--help`` lists the accepted options (default this one's), named after an unknown option."""
    other_options: tuple[str, ...] = ()
    """Options the same command line accepts through another parser (a launcher's own, beside its ranks'), offered
    too when an unknown option is corrected."""
    _unknown_options: tuple[str, ...] = ()
    """The options of the command line being parsed that this parser does not know: a missing required option is
    named after them, since it may be one of them misspelt."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        # No abbreviations: --check would be --checkpoint today and an error once another --check... option exists,
        # and an abbreviation a launcher takes for its own never reaches the ranks.
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)

    def parse_known_args(self, args=None, namespace=None):  # argparse's signature
        given = sys.argv[1:] if args is None else list(args)
        known = (*self._option_string_actions, "--")
        self._unknown_options = tuple(
            arg for arg in given if arg.startswith("--") and arg.partition("=")[0] not in known
        )
        return super().parse_known_args(given, namespace)

    def parse_args(self, args=None, namespace=None):  # argparse's signature
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.refuse_unrecognized(extras)
        return parsed

    def refuse_unrecognized(self, extras: Sequence[str]) -> NoReturn:
        """Refuse arguments that no option takes, naming the known option spelled most like the first unknown one
        that has such a neighbour, else where the options are listed."""
        known = [*self._option_string_actions, *self.other_options]
        for extra in extras:
            match = closest(extra.partition("=")[0], known) if extra.startswith("-") else None
            if match is not None:
                self.error(f"unrecognized arguments: {' '.join(extras)} (did you mean {match}?)")
        self.error(f"unrecognized arguments: {' '.join(extras)} (see `{self.help_command or self.prog} --help`)")

    def option_strings(self) -> tuple[str, ...]:
        """Every option this parser accepts, each spelling (``--num_gpus``, ``--nproc_per_node``)."""
        return tuple(self._option_string_actions)

    def error(self, message: str) -> NoReturn:
        if message.startswith("the following arguments are required") and self._unknown_options:
            # A misspelt required option shows as a missing one: name the misspelling, as any unknown option is named.
            unknown, self._unknown_options = self._unknown_options, ()
            self.refuse_unrecognized(unknown)
        self.exit(2, f"{self.prog}: error: {message}\n")
