"""The test counts the README and docs/testing.md give for each tier are the counts pytest collects today
(``python -m pytest --collect-only -q --tier-counts``, tests/conftest.py), so adding or moving a test without
updating the pages fails here instead of leaving two pages that disagree."""

import json
import re
import sys
from pathlib import Path

import pytest
import subproc

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # collects every test in a fresh pytest process (~15 s)


@pytest.fixture(scope="module")
def counts():
    proc = subproc.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "--tier-counts"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("tier counts: "))
    return json.loads(line.removeprefix("tier counts: "))


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_the_tier_table_in_testing_md_counts_what_pytest_collects(counts):
    table = {}
    for row in (ROOT / "docs" / "testing.md").read_text().splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if row.startswith("| ") and len(cells) == 3 and cells[0].strip("`") in counts:
            table[cells[0].strip("`")] = number(cells[2])
    assert table == counts


def test_the_readme_counts_the_default_and_slow_tiers_as_collected(counts):
    readme = (ROOT / "README.md").read_text()
    default = re.search(r"([\d,]+) tests in [\d.]+ min", readme)
    slow = re.search(r"\(([\d,]+) tests that start verl", readme)
    assert default and slow, "the README's test paragraph changed its wording: update this test with it"
    assert number(default.group(1)) == counts["default"]
    assert number(slow.group(1)) == counts["slow"]
