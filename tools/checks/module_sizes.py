"""Refuse a Python module over 400 lines unless its first lines say why; ``make lint`` runs it over src/rlscale and
scripts.

A long module is usually several concerns; one that is genuinely one concern passes by saying so within its first 10
lines, in a line holding the marker "over 400 lines because" (docs/architecture.md, "Module size").

Usage: python tools/checks/module_sizes.py [FOLDER...]   (default: src/rlscale scripts; exit 1 naming each module over)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

LIMIT = 400
"""Most lines a module has without a stated reason."""
REASON_MARKER = "over 400 lines because"
"""What a module's first lines hold when it is over the limit on purpose."""
REASON_WITHIN = 10
"""How many of its first lines may hold the reason."""
DEFAULT_FOLDERS = ("src/rlscale", "scripts")
ROOT = Path(__file__).resolve().parents[2]


def has_reason(lines: list[str]) -> bool:
    return any(REASON_MARKER in line for line in lines[:REASON_WITHIN])


def oversized(folders: list[Path]) -> list[str]:
    """One line for each module under ``folders`` over :data:`LIMIT` lines without a reason, in path order."""
    problems = []
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            lines = path.read_text().splitlines()
            if len(lines) > LIMIT and not has_reason(lines):
                problems.append(
                    f"{path}: {len(lines)} lines, over {LIMIT}: split it by concern, or state in its first "
                    f"{REASON_WITHIN} lines why not (a line with {REASON_MARKER!r})"
                )
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", type=Path, default=[ROOT / folder for folder in DEFAULT_FOLDERS])
    problems = oversized(parser.parse_args(argv).folders)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
