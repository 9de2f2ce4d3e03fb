"""How far four values travel through the code: the files and functions that name each, and the largest modules.

A before/after measure for refactors of the study → launch → run boundary (issue 30). A function counts for a value
when its own body (nested functions apart) names one of the value's spellings; Snakemake rules count per file.
Usage: ``python tools/value_reach.py`` from the project root; prints a Markdown table.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SPELLINGS = {
    "num_envs": r"\bnum_envs\w*|\bnum_envs_per_rank\b",
    "world size": r"\bworld_size\b|\bws\b|\bnproc_per_node\b|\bnum_gpus\b|\bgranted\w*|\bWORLD_SIZE\b|\bgpus_needed\w*",
    "rl_library": r"\brl_library\b|\blibrary\b|\bframework\b",
    "device": r"\bdevice\b|\bdevice_kind\b|\bdevice_str\w*",
}
SOURCES = ("src/rlscale", "scripts", "workflow")


def own_lines(node: ast.AST) -> set[int]:
    """Line numbers of a function's body, less those of the functions nested in it."""
    lines = set(range(node.lineno, node.end_lineno + 1))
    for child in ast.walk(node):
        if child is not node and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines -= set(range(child.lineno, child.end_lineno + 1))
    return lines


def reach(root: Path) -> dict[str, tuple[int, int]]:
    """Value → (files, functions) that name it."""
    patterns = {value: re.compile(spelling) for value, spelling in SPELLINGS.items()}
    files = {value: 0 for value in SPELLINGS}
    functions = {value: 0 for value in SPELLINGS}
    for source in SOURCES:
        for path in sorted((root / source).rglob("*")):
            if path.suffix not in (".py", ".smk") and path.name != "Snakefile":
                continue
            text = path.read_text()
            lines = text.splitlines()
            for value, pattern in patterns.items():
                if pattern.search(text):
                    files[value] += 1
            if path.suffix != ".py":
                continue
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    body = "\n".join(lines[number - 1] for number in sorted(own_lines(node)))
                    for value, pattern in patterns.items():
                        functions[value] += bool(pattern.search(body))
    return {value: (files[value], functions[value]) for value in SPELLINGS}


def largest_modules(root: Path, count: int = 5) -> list[tuple[int, str]]:
    sizes = [(len(path.read_text().splitlines()), str(path.relative_to(root))) for path in (root / "src").rglob("*.py")]
    return sorted(sizes, reverse=True)[:count]


def main() -> None:
    root = Path.cwd()
    print("| value | files | functions |\n|---|---|---|")
    for value, (files, functions) in reach(root).items():
        print(f"| {value} | {files} | {functions} |")
    print("\n| module | lines |\n|---|---|")
    for lines, module in largest_modules(root):
        print(f"| {module} | {lines} |")


if __name__ == "__main__":
    main()
