"""The argument parser of every rlscale command; at the bottom of the layers, so that any module may import it."""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """Argument parser whose errors are one line on stderr and exit code 2, as every rlscale command's are.

    The default prints the whole multi-line usage first, which buries the one line that matters.
    """

    help_command: str | None = None
    """Command whose ``--help`` lists the accepted options (default this one's), named after an unknown option."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments"):
            message += f" (see `{self.help_command or self.prog} --help`)"
        self.exit(2, f"{self.prog}: error: {message}\n")
