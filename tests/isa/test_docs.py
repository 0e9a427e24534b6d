"""docs/isa.md is generated from the code; this fails when they disagree."""
from pathlib import Path

from isa.docs import render

DOC = Path(__file__).resolve().parents[2] / "docs" / "isa.md"


def test_isa_doc_matches_code():
    assert DOC.read_text() == render("pynq-z1"), "docs/isa.md is stale: run `python -m isa.docs > docs/isa.md`"


def test_doc_lists_every_field():
    import isa

    text = DOC.read_text()
    for lay in isa.layouts(isa.make_config("pynq-z1")).values():
        for f in lay.fields:
            assert f"| `{f.name}` | {f.hi}:{f.lo} |" in text
