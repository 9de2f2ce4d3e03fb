"""The docs a user reads: the README is a short front page, links resolve, sentences stay readable, and tracked files
describe the project as it is, with its development history left to git (CONTRIBUTING.md, "Writing docs")."""

from __future__ import annotations

import re
import statistics
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
USER_PAGES = [README, *DOCS]

README_MAX_LINES = 130
FIRST_LINES = 50
"""The install, train, multi-GPU and study commands appear within the README's first this many lines."""
FIRST_COMMANDS = {
    "install": "make setup",
    "train": "rlscale train ",
    "multi-GPU": "rlscale train_multigpu ",
    "study": "snakemake --workflow-profile",
}

HISTORY_PATTERNS = {
    r"\bissues? #?\d+": "an issue number; cite an upstream issue by its URL",
    r"(?<![\w&/.-])#\d+\b": "an issue or pull-request number",
    r"\b(first|second|third|later|earlier|next|previous) round\b": "a round of work",
    r"\bround (one|two|three|\d+)\b": "a round of work",
    r"\b(this|that|a later|an earlier|a second|either|device|gpu) session\b": "a session of work",
    r"\b(first|second|third|earlier|later|previous) attempts? (at|of|lost|ran|was|were)\b": "an attempt at the work",
    r"\.\./shared|shared/(notes)": "notes outside the repository",
    r"\b(the|its|of|no) device time\b|\bdevice time (ran|was|for)\b": "how a measurement came about",
    r"\blent\b": "how a measurement came about",
    r"\bwe tried\b": "how a measurement came about",
    r"\bpreviously\b": "how a measurement came about",
}
"""Development history, case-insensitive: specific enough to leave honest technical words alone (a process session,
a job's attempt, round-robin)."""
HISTORY = re.compile("|".join(f"(?:{pattern})" for pattern in HISTORY_PATTERNS), re.IGNORECASE)
HISTORY_EXEMPT = {"CHANGELOG.md", "tests/test_docs.py"}
"""The changelog is history by design; this file states the patterns and samples of what they catch."""
GENERATED_REPORT = "report.html"
"""Snakemake's study report: its bundled JavaScript libraries carry their own comments, none of them ours."""

MAX_MEDIAN_WORDS = 20
MAX_WORDS = 45

LIST_ITEM = re.compile(r"^(?:[-*]|\d+\.)\s+")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def relative_links(page: Path) -> list[str]:
    """Targets of the page's Markdown links that point into the repository, without their anchors."""
    targets = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor within the page
        targets.append(target.split("#", 1)[0])
    return targets


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_relative_links_resolve(page):
    missing = [target for target in relative_links(page) if not (page.parent / target).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_readme_is_a_front_page():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines, more than {README_MAX_LINES}"
    first = "\n".join(lines[:FIRST_LINES])
    late = [what for what, command in FIRST_COMMANDS.items() if command not in first]
    assert not late, f"README.md should show its {', '.join(late)} command(s) within its first {FIRST_LINES} lines"


@pytest.mark.parametrize("name", ["LICENSE", "CONTRIBUTING.md", "CHANGELOG.md", "CITATION.cff", "docs/README.md"])
def test_project_file_exists(name):
    assert (ROOT / name).is_file(), f"{name} is missing"


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text()
    unlisted = [page.name for page in DOCS if page.name != "README.md" and f"]({page.name})" not in index]
    assert not unlisted, f"docs/README.md does not link {unlisted}"


def tracked_text_files() -> list[str]:
    names = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split("\0")
    return [name for name in names if name and name not in HISTORY_EXEMPT and Path(name).name != GENERATED_REPORT]


def history_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if HISTORY.search(line)]


CAUGHT = [
    "Issue 17 of the quarterly journal",
    "as #37 of the series says",
    "served in a later round",
    "## Round two: the final",
    "the court sat for a second session",
    "the phone shows the device time",
    "a lent umbrella",
    "a second attempt at the summit",
    "a map in ../shared/maps",
    "a recipe in shared/notes/soup.md",
    "we tried the cake",
    "previously on the show",
]
"""Lines each history pattern must catch, in words that tell no history of this project."""


@pytest.mark.parametrize("line", CAUGHT)
def test_history_patterns_catch(line):
    assert history_lines(line) == [line]


def test_every_history_pattern_has_a_line_it_catches():
    untried = [pattern for pattern in HISTORY_PATTERNS if not any(re.search(pattern, line, re.I) for line in CAUGHT)]
    assert not untried, f"history patterns with no example in CAUGHT: {untried}"


@pytest.mark.parametrize(
    "line",
    [
        "torchrun runs in a session of its own",
        "start_new_session=True",
        "the failed attempt left nothing held; the first attempt starts from scratch",
        "operators by host and device time",
        "rsl_rl issues NCCL all-reduces",
        "round-robin over the ranks, rounding to 3 digits",
        "a lost rank or a lost connection",
        "https://github.com/Denys88/rl_games/pull/363",
        "&#8217; an HTML entity",
    ],
)
def test_history_patterns_leave_technical_words(line):
    assert history_lines(line) == []


def test_tracked_files_carry_no_development_history():
    hits = []
    for name in tracked_text_files():
        path = ROOT / name
        if not path.is_file():
            continue  # deleted in the working tree
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary: images, archives
        hits += [f"{name}: {line[:100]}" for line in history_lines(text)]
    assert not hits, "development history belongs in git commit messages or CHANGELOG.md:\n" + "\n".join(hits)


def prose(text: str) -> str:
    """The page's running text: code blocks (fenced or indented), tables, headings and images become blank lines."""
    kept, fenced, indented = [], False, False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            kept.append("")
            continue
        indented = line.startswith("    ") and (indented or not kept or kept[-1] == "")
        stripped = line.strip()
        if fenced or indented or stripped.startswith(("|", "#", "![")):
            kept.append("")
        elif LIST_ITEM.match(stripped):
            kept += ["", LIST_ITEM.sub("", stripped)]  # an item starts a sentence of its own
        else:
            kept.append(stripped)
    return "\n".join(kept)


def sentences(text: str) -> list[str]:
    """Sentences of the running text; a paragraph break ends one too."""
    text = re.sub(r"`[^`]*`", "CODE", prose(text))  # inline code counts as one word, and its dots end nothing
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts by its words
    text = re.sub(r"\b(e\.g|i\.e|etc|vs|cf)\.", r"\1", text)
    parts = []
    for block in re.split(r"\n\s*\n", text):
        parts += re.split(r"(?<=[.!?])\s+(?=[\w(`\"*])", " ".join(block.split()))
    return [part for part in parts if len(part.split()) > 1]


def test_sentences_split_as_a_reader_reads_them():
    text = (
        "A short one. Then `rlscale train --task x.y` runs, e.g. on a GPU.\n\n"
        "```\nnot. counted. at all.\n```\n- One item\n- Two"
    )
    assert sentences(text) == ["A short one.", "Then CODE runs, e.g on a GPU.", "One item"]


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda page: page.relative_to(ROOT).as_posix())
def test_sentences_are_short(page):
    counts = [(len(sentence.split()), sentence) for sentence in sentences(page.read_text())]
    median = statistics.median(count for count, _ in counts)
    long = [f"{count} words: {sentence[:80]}…" for count, sentence in counts if count > MAX_WORDS]
    assert median <= MAX_MEDIAN_WORDS, f"{page.relative_to(ROOT)}: median sentence of {median} words"
    assert not long, f"{page.relative_to(ROOT)} has sentences over {MAX_WORDS} words:\n" + "\n".join(long)
