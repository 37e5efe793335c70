"""House style that a reader relies on (docs/design.md, house style), checked over the whole tree.

* Modules stay under ~400 lines: every ``.py`` file under fbgemm_npu/, tests/, conformance/ and
  bench/ has at most :data:`MAX_LINES` lines, except the data-table modules of
  :data:`DATA_TABLES`, each with the reason beside it.
* Every document a file cites is in the repository: the design, the op catalogue and the hardware
  notes live under docs/; citations of the seed-era places (a design or catalogue file at the
  root, the ``shared`` folder beside the checkout) may appear only as paths that exist here.
* Every repository path a ``.py`` or ``.md`` file names (``tests/core/test_import.py``,
  ``docs/ops.md``, ``../docs/design.md`` in a README) exists, read from the repository root or
  from the citing file's folder; names with placeholders (``bench/<namespace>/<family>.py``,
  ``bench/fbgemm/*.py``) are patterns, not paths, and are not checked.

This file itself is not scanned: it holds the patterns and the examples they are tested on.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
MAX_LINES = 400
CODE_ROOTS = ("fbgemm_npu", "tests", "conformance", "bench")

# Modules that are a table of data more than code, allowed past MAX_LINES: path -> why.
DATA_TABLES: dict[str, str] = {}

# The seed-era citations: a design or catalogue file at the root, and the folder beside the
# checkout.  Case-sensitive: docs/design.md and docs/ops.md are the repository's own.
OLD_CITATION = re.compile(r"(?<![\w./-])([\w./-]*(?:DESIGN\.md|OPS\.md|shared/)[\w./-]*)")
# A path into the repository: a top-level folder of it, then a file name with an extension.
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:\.\./)*(?:fbgemm_npu|tests|conformance|bench|docs|scripts|requirements)/"
    r"[\w./-]*\.(?:py|md|txt|toml|cfg|sh|cpp|h|json))(?![\w<*{/-])"
)


def _walk(suffixes: tuple[str, ...], roots: tuple[str, ...] | None = None) -> Iterator[Path]:
    """Files of the working tree (hidden folders, caches and build metadata aside)."""
    tops = [REPO] if roots is None else [REPO / r for r in roots]
    for top in tops:
        for folder, subfolders, names in os.walk(top):
            subfolders[:] = sorted(
                d
                for d in subfolders
                if not d.startswith(".") and d != "__pycache__" and not d.endswith(".egg-info")
            )
            for name in sorted(names):
                path = Path(folder) / name
                if name.endswith(suffixes) and path != HERE:
                    yield path


def _exists(cited: str, citing: Path) -> bool:
    cited = cited.rstrip(".")
    for base in (REPO, citing.parent):
        target = (base / cited).resolve()
        if target.is_relative_to(REPO) and target.exists():
            return True
    return False


def _dangling(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in _walk((".py", ".md")):
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            for match in pattern.finditer(line):
                if not _exists(match.group(1), path):
                    found.append(f"{path.relative_to(REPO)}:{number}: {match.group(1)}")
    return found


def test_modules_stay_under_the_line_limit() -> None:
    over = []
    for path in _walk((".py",), CODE_ROOTS):
        name = path.relative_to(REPO).as_posix()
        lines = len(path.read_text(errors="replace").splitlines())
        if lines > MAX_LINES and name not in DATA_TABLES:
            over.append(f"{name}: {lines} lines")
    assert not over, f"modules over {MAX_LINES} lines (split them by role):\n" + "\n".join(over)


def test_data_table_allowances_name_existing_modules_with_a_reason() -> None:
    for name, why in DATA_TABLES.items():
        assert (REPO / name).is_file(), f"DATA_TABLES names {name}, which is not a file"
        assert why.strip(), f"DATA_TABLES: {name} needs the reason it is allowed"


def test_no_file_cites_a_document_outside_the_repository() -> None:
    found = _dangling(OLD_CITATION)
    assert not found, (
        "citations of documents that are not in the repository (the design is docs/design.md, "
        "the op catalogue docs/ops.md, the hardware notes docs/hardware.md):\n" + "\n".join(found)
    )


def test_every_repository_path_named_exists() -> None:
    found = _dangling(REPO_PATH)
    assert not found, "paths named that are not in the repository:\n" + "\n".join(found)


def test_the_checks_see_what_they_claim() -> None:
    """The patterns catch the forms they are written for, and let the others be."""
    old = ["see OPS.md", "DESIGN.md rule 1", "../shared/seeds/", "shared/torch_npu/x.txt"]
    assert [OLD_CITATION.search(text) is not None for text in old] == [True] * len(old)
    assert OLD_CITATION.search("docs/design.md and docs/ops.md") is None
    paths = {
        "``tests/core/test_import.py``": "tests/core/test_import.py",
        "[design](../docs/design.md).": "../docs/design.md",
        "bench/<namespace>/<family>.py": None,
        "bench/fbgemm/*.py": None,
        "fbgemm_npu.native.family": None,
    }
    for text, want in paths.items():
        match = REPO_PATH.search(text)
        assert (match and match.group(1)) == want, text
    assert _exists("../docs", REPO / "tests" / "README.md") == (REPO / "docs").exists()
    assert not _exists("../../outside.md", REPO / "tests" / "README.md")
