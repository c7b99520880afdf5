"""docs/references.md and the code cite the same papers: every ``[Key2011]`` in the code is listed, every
listed key is cited somewhere (no dead entry, no citation without its full reference)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KEY = re.compile(r"\[((?:[A-Z][A-Za-z]+\d{4})|Seed\d{3})\]")
ENTRY = re.compile(r"^- \*\*\[((?:[A-Z][A-Za-z]+\d{4})|Seed\d{3})\]\*\*", re.M)


def _cited() -> dict[str, list[str]]:
    cited: dict[str, list[str]] = {}
    for package in ("labeling", "metrics", "colorimetry", "bench", "config"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for key in KEY.findall(path.read_text(encoding="utf-8")):
                cited.setdefault(key, []).append(str(path.relative_to(ROOT)))
    return cited


def _listed() -> list[str]:
    return ENTRY.findall((ROOT / "docs" / "references.md").read_text(encoding="utf-8"))


def test_every_key_the_code_cites_is_in_the_references():
    listed = set(_listed())
    missing = {key: paths for key, paths in _cited().items() if key not in listed}
    assert not missing, f"cited in the code but not in docs/references.md: {missing}"


def test_every_reference_is_cited_by_the_code():
    cited = _cited()
    unused = [key for key in _listed() if key not in cited]
    assert not unused, f"listed in docs/references.md but cited nowhere in the code: {unused}"


def test_references_are_listed_once():
    listed = _listed()
    assert len(listed) == len(set(listed)), sorted(k for k in listed if listed.count(k) > 1)
    assert len(listed) >= 40
