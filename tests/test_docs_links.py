"""Every relative link in the README, the CHANGELOG, docs/*.md and docs/results/*.md points at a file that exists,
and every ``#anchor`` into one of our markdown files at a heading it has (GitHub's slug rule), so moving or renaming
a page or a heading cannot leave a dead link behind."""

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([*(ROOT / "docs").glob("*.md"), *(ROOT / "docs" / "results").glob("*.md")])
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS])

FENCE = re.compile(r"^ {0,3}(```|~~~)")
# [text](target) and ![alt](target); the target stops at whitespace or the closing parenthesis
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def prose_lines(text):
    """The page's lines outside fenced code blocks, with their line numbers."""
    fenced = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match:
            if fenced is None:
                fenced = match.group(1)
            elif match.group(1) == fenced:
                fenced = None
            continue
        if fenced is None:
            yield number, line


def slug(heading):
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation other than '-' and '_' removed,
    each space a '-' (so '`a.b` (c)' -> 'ab-c')."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading keeps its text
    text = re.sub(r"<[^>]+>", "", text).replace("*", "")
    text = text.strip().lower()
    kept = [c for c in text if c in "-_ " or unicodedata.category(c)[0] in "LNM"]
    return "".join(kept).replace(" ", "-")


def anchors(path):
    """The anchors of a page's headings; a repeated heading gets -1, -2, ... as on GitHub."""
    seen = {}
    out = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path):
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        line_without_code = CODE_SPAN.sub("", line)
        for match in LINK.finditer(line_without_code):
            yield number, match.group(1)
        match = REF_DEF.match(line_without_code)
        if match:
            yield number, match.group(1)


def broken_links(page):
    """(line, target, why) for every relative link of ``page`` that does not resolve."""
    out = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("//"):
            continue  # http:, https:, mailto: ...: not ours to check offline
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not dest.exists():
            out.append((number, target, "no such file"))
        elif anchor and dest.suffix == ".md" and dest.is_file() and unquote(anchor) not in anchors(dest):
            out.append((number, target, f"no heading with anchor #{anchor} in {dest.name}"))
    return out


@pytest.mark.parametrize("page", [p for p in PAGES if p.exists()], ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = broken_links(page)
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(f"line {n}: {t} ({why})" for n, t, why in broken)


def test_the_pages_exist():
    """The README, the CHANGELOG and the docs index are the entry points every other page is reached from."""
    for name in ("README.md", "CHANGELOG.md", "docs/README.md"):
        assert (ROOT / name).is_file(), name


def test_every_docs_page_is_in_the_index():
    """docs/README.md lists every page of docs/ and docs/results/ (and the README's Documentation table links the
    index)."""
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    listed = {(ROOT / "docs" / t.partition("#")[0]).resolve() for _, t in links(ROOT / "docs" / "README.md")}
    missing = [str(p.relative_to(ROOT)) for p in DOCS if p.name != "README.md" and p.resolve() not in listed]
    assert not missing, f"docs/README.md does not list {missing}"
    assert index.startswith("# ")
    assert "docs/README.md" in (ROOT / "README.md").read_text(encoding="utf-8")


def test_slug_rule():
    assert slug("The tiny model (built on first use, cached)") == "the-tiny-model-built-on-first-use-cached"
    assert slug("Per-turn credit (`+algorithm.slca.credit=turn`, `slca_verl/estimators/turn_credit.py`)") == (
        "per-turn-credit-algorithmslcacreditturn-slca_verlestimatorsturn_creditpy"
    )
    assert slug("tau^2-bench (`python -m slca_verl.eval.tau2`, optional extra)") == (
        "tau2-bench-python--m-slca_verlevaltau2-optional-extra"
    )
    assert slug("1. Install") == "1-install"
    assert slug("GRPO groups in the asynchronous modes, and what they do to segment-locked credit") == (
        "grpo-groups-in-the-asynchronous-modes-and-what-they-do-to-segment-locked-credit"
    )


def test_a_broken_link_is_found(tmp_path):
    """The check itself: a missing file, a missing heading and a link inside code (ignored)."""
    (tmp_path / "other.md").write_text("# Other page\n\n## A section (`x.y`)\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-section-xy) [self](#page) [gone](missing.md) [bad](other.md#nope)\n"
        "`[code](missing.md)`\n\n```\n[fenced](missing.md)\n```\n",
        encoding="utf-8",
    )
    found = [(t, why.split(" ")[0]) for _, t, why in broken_links(page)]
    assert found == [("missing.md", "no"), ("other.md#nope", "no")]


# a pointer from code to a section of a page: (docs/gpu.md, "5. RL on several nodes"), shell-escaped quotes included
POINTER = re.compile(r"(docs/[\w/]+\.md|README(?:\.md)?), \\?\"([^\"\\]+)\\?\"")
CODE = sorted(
    p
    for pattern in ("recipes/*.sh", "recipes/*.py", "scripts/*.sh", "scripts/*.py", "slca_verl/**/*.py", "setup.py")
    for p in ROOT.glob(pattern)
)


def sections(page: Path) -> list[str]:
    """The headings of a page and the labels of its bold-led paragraphs (``**Judge throughput.** ...``)."""
    text = page.read_text()
    heads = [HEADING.match(line).group(2) for line in text.splitlines() if HEADING.match(line)]
    return heads + re.findall(r"^\*\*([^*]+?)\.?\*\*", text, re.M)


def test_every_pointer_from_code_to_a_section_of_a_page_names_a_section_it_has():
    """Start-up errors and recipe comments say where to read on ("docs/gpu.md, "5. RL on several nodes""); they used
    to point at README sections that no longer exist ("Several nodes", "GPU install")."""
    dead = []
    for path in CODE:
        for page, title in POINTER.findall(path.read_text()):
            target = ROOT / ("README.md" if page.startswith("README") else page)
            found = target.is_file() and any(s.startswith(title) for s in sections(target))
            if not found:
                dead.append(f"{path.relative_to(ROOT)}: {page}, {title!r}")
    assert not dead, dead
