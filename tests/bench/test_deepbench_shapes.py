"""hobbit.bench.deepbench_shapes: the transcription against DeepBench's own counts and a few
rows read by hand from its headers, so an edit that drops, reorders or mistypes a row fails."""

from __future__ import annotations

import dataclasses
import re

import pytest

from hobbit.bench.deepbench_shapes import CONV, COMMIT, GEMM, RNN, SOURCE, ConvShape, GemmShape, RnnShape


def test_source_and_commit() -> None:
    assert SOURCE == "https://github.com/baidu-research/DeepBench"
    assert re.fullmatch(r"[0-9a-f]{40}", COMMIT)


@pytest.mark.parametrize(("table", "server", "device"), [(GEMM, 75, 13), (CONV, 107, 16), (RNN, 69, 3)])
def test_counts_include_duplicates(table: dict, server: int, device: int) -> None:
    assert set(table) == {"server", "device"}
    assert (len(table["server"]), len(table["device"])) == (server, device)


def test_first_and_last_rows_match_the_headers() -> None:
    assert GEMM["server"][0] == GemmShape(5124, 700, 2048, False, False)
    assert GEMM["server"][-1] == GemmShape(1024, 4, 512, False, False)
    assert GEMM["device"][0] == GemmShape(5124, 700, 2048, False, False)
    assert GEMM["device"][-1] == GemmShape(4224, 1, 128, False, False)
    assert CONV["server"][0] == ConvShape(700, 161, 1, 1, 32, 20, 5, 0, 0, 2, 2)
    assert CONV["server"][-1] == ConvShape(7, 7, 2048, 2, 512, 1, 1, 0, 0, 1, 1)
    assert CONV["device"][0] == ConvShape(112, 112, 64, 1, 64, 1, 1, 0, 0, 1, 1)
    assert CONV["device"][-1] == ConvShape(7, 7, 2048, 1, 512, 1, 1, 0, 0, 1, 1)
    assert RNN["server"][0] == RnnShape("lstm", 512, 1, 25)
    assert RNN["server"][-1] == RnnShape("gru", 1024, 4, 1500)
    assert RNN["device"][0] == RnnShape("vanilla", 32, 1, 672)
    assert RNN["device"][-1] == RnnShape("lstm", 256, 1, 150)


def test_field_order_is_width_first() -> None:
    """The first conv row is 700 wide, 161 high with a 20-wide, 5-high filter: w, h, s, r."""
    first = CONV["server"][0]
    assert (first.w, first.h, first.filter_w, first.filter_h) == (700, 161, 20, 5)


def test_fields_are_sane() -> None:
    for shapes in GEMM.values():
        for g in shapes:
            assert min(g.m, g.n, g.k) > 0
            assert isinstance(g.a_t, bool) and isinstance(g.b_t, bool)
    for shapes in CONV.values():
        for c in shapes:
            assert min(c.w, c.h, c.c, c.n, c.k, c.filter_w, c.filter_h, c.stride_w, c.stride_h) > 0
            assert c.pad_w >= 0 and c.pad_h >= 0
    for shapes in RNN.values():
        for r in shapes:
            assert r.kind in ("vanilla", "lstm", "gru")
            assert min(r.hidden, r.batch, r.timesteps) > 0


def test_conv_output_hw_is_the_standard_formula() -> None:
    for shapes in CONV.values():
        for c in shapes:
            oh = (c.h + 2 * c.pad_h - c.filter_h) // c.stride_h + 1
            ow = (c.w + 2 * c.pad_w - c.filter_w) // c.stride_w + 1
            assert c.output_hw() == (oh, ow)
            assert oh > 0 and ow > 0
    assert CONV["server"][0].output_hw() == (79, 341)
    # DeepBench pads this 1x1, stride-2 filter by 3; kept as written.
    assert ConvShape(7, 7, 2048, 1, 512, 1, 1, 3, 3, 2, 2) in CONV["server"]
    assert ConvShape(7, 7, 2048, 1, 512, 1, 1, 3, 3, 2, 2).output_hw() == (7, 7)


def test_flops() -> None:
    assert GemmShape(2, 3, 4, False, True).flops() == 48
    # 7x7 -> 7x7 with a 3x3 pad-1 filter: 2 * 1 * 512 * 49 * 512 * 9.
    assert ConvShape(7, 7, 512, 1, 512, 3, 3, 1, 1, 1, 1).flops() == 2 * 512 * 49 * 512 * 9
    assert RnnShape("vanilla", 10, 2, 3).flops() == 3 * 1 * 2 * 20 * 10 * 2
    assert RnnShape("lstm", 10, 2, 3).flops() == 4 * RnnShape("vanilla", 10, 2, 3).flops()
    assert RnnShape("gru", 10, 2, 3).flops() == 3 * RnnShape("vanilla", 10, 2, 3).flops()


def test_shapes_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        GEMM["server"][0].m = 1  # type: ignore[misc]
