"""SUPPORTED_OPS.md must match the converter table it is generated from."""

from pathlib import Path

from hobbit.frontend.supported import supported_ops_markdown


def test_supported_ops_document_is_current():
    doc = Path(__file__).resolve().parents[2] / "SUPPORTED_OPS.md"
    assert doc.read_text() == supported_ops_markdown(), \
        "SUPPORTED_OPS.md is stale: run `python -m hobbit.frontend.supported > SUPPORTED_OPS.md`"
