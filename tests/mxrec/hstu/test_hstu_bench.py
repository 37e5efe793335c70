"""``python -m bench hstu`` (bench/mxrec/hstu.py) at a tiny size, so that it cannot rot.

The sweep writes one row per max_seq_len, pass and implementation, with the counted columns of
our op (0 AI-CPU, 0 syncs + stalls: ``max_seq_len`` is given) equal to a count of the same call
made here; the long mode writes its forward + backward row and its peak-memory line, and leaves
the naive side out when its score tensor passes the limit.  The naive reference the bench checks
ours against is itself checked against the float64 reference written from the math.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import fbgemm_npu
from conformance.specs.mxrec.hstu.reference import hstu_jagged_reference
from fbgemm_npu.testing import counters
from fbgemm_npu.testing.cost_910b import Cost

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # bench/ is a folder of the repository, not an installed package
    sys.path.insert(0, str(REPO))

from bench.__main__ import main as bench_main  # noqa: E402
from bench.mxrec import hstu  # noqa: E402

pytestmark = pytest.mark.skipif(
    fbgemm_npu.device_kind() == "none", reason="no npu device (tests/conftest.py switches it on)"
)
TINY = ["--batch", "2", "--heads", "2", "--dim", "8", "--repeats", "1"]


@pytest.fixture(autouse=True)
def _keep_threads():  # type: ignore[no-untyped-def]
    """``python -m bench`` sets torch's thread count (``--threads``); later tests keep theirs."""
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _rows(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    cells = ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    return [dict(zip(head, row, strict=True)) for row in cells]


def test_sweep_writes_a_row_per_size_pass_and_implementation(tmp_path: Path) -> None:
    out = tmp_path / "hstu.md"
    assert bench_main(["hstu", "--sizes", "16", "32", *TINY, "--out", str(out)]) == 0
    rows = _rows(out.read_text())
    keys = [(r["max_seq_len"], r["pass"], r["impl"]) for r in rows]
    assert keys == [
        (s, p, i)
        for s in ("16", "32")
        for p in ("forward", "forward+backward")
        for i in ("ours", "naive")
    ]
    for r in rows:
        assert r["AI-CPU"] == "0" and r["unsupported"] == "-", r
        if r["impl"] == "ours":
            assert r["syncs + stalls"] == "0 + 0", r

    # the table's count of our forward is the counters' count of the same call
    s = 32
    x = hstu.make_inputs(hstu.draw_lengths(2, s), s, 2, 8, "npu")
    with torch.no_grad(), counters.count() as c:
        hstu.ours(x)
    key = ("32", "forward", "ours")
    (shown,) = (r for r in rows if (r["max_seq_len"], r["pass"], r["impl"]) == key)
    assert shown["launches"] == str(c.launches)
    assert shown["MB"] == f"{Cost.of(c.events).megabytes:.2f}"


def test_long_mode_writes_its_row_and_peak(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "long.md"
    assert bench_main(["hstu", "--max-seq-len", "64", *TINY, "--out", str(out)]) == 0
    text = out.read_text()
    rows = _rows(text)
    assert [(r["max_seq_len"], r["pass"], r["impl"]) for r in rows] == [
        ("64", "forward+backward", "ours"),
        ("64", "forward+backward", "naive"),
    ]
    assert "max_seq_len 64: forward + backward peak" in text

    monkeypatch.setattr(hstu, "NAIVE_LIMIT", 0)  # a score tensor past the limit: ours alone
    assert bench_main(["hstu", "--max-seq-len", "64", *TINY, "--out", str(out)]) == 0
    text = out.read_text()
    assert [r["impl"] for r in _rows(text)] == ["ours"] and "naive not run" in text


def test_the_naive_reference_is_the_float64_one() -> None:
    s, lengths = 12, [12, 7, 0, 9]
    x = hstu.make_inputs(lengths, s, 2, 4, "npu", seed=3)
    got = hstu.naive(x).detach().cpu().double()
    q, k, v = (t.detach().cpu() for t in x.leaves)
    want = hstu_jagged_reference(q, k, v, x.offsets.cpu(), max_seq_len=s)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
