"""The module-size rule of ``make lint`` (tools/checks/module_sizes.py): over 400 lines only with a reason up top."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "checks" / "module_sizes.py"


def check(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), str(folder)], capture_output=True, text=True, timeout=60)


def write_module(folder: Path, name: str, head: list[str], lines: int) -> Path:
    path = folder / name
    path.write_text("\n".join([*head, *(f"x{i} = {i}" for i in range(lines - len(head)))]) + "\n")
    return path


def test_long_module_without_a_reason_fails(tmp_path):
    path = write_module(tmp_path, "long.py", ['"""Many things."""'], 401)
    write_module(tmp_path, "short.py", ['"""Few things."""'], 400)
    result = check(tmp_path)
    assert result.returncode == 1
    (problem,) = result.stderr.splitlines()  # the 400-line module passes
    assert problem.startswith(f"{path}: 401 lines, over 400")


def test_long_module_with_a_reason_in_its_first_lines_passes(tmp_path):
    head = ['"""One concern.', "", "It is over 400 lines because the table below is one record.", '"""']
    write_module(tmp_path, "long.py", head, 450)
    assert check(tmp_path).returncode == 0


def test_a_reason_below_the_first_lines_does_not_count(tmp_path):
    head = ['"""One concern."""', *[f"y{i} = {i}" for i in range(10)], "# over 400 lines because of the table"]
    write_module(tmp_path, "long.py", head, 450)
    assert check(tmp_path).returncode == 1
