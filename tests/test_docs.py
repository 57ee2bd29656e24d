"""The repository documents itself: the design and operations live in ``docs/``, nothing refers
outside the repository for them, every relative link resolves, the README fits on a screen, and
every metric the daemons export is on the metrics page."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

from broker.metrics import TieredStorageCollector
from controller.metrics import ControllerMetrics, ControllerSnapshot, ControllerStateCollector
from tests.support.in_process_broker import in_process_broker
from tests.support.processes import REPO
from tiered.api import TopicIdPartition

ROOT = Path(REPO)
_LINK = re.compile(r"\[[^\]]*\]\(([^)#\s]+)(?:#[^)]*)?\)")


_NOT_SOURCES = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"}


def _sources() -> list[Path]:
    """The repository's files, without what tools make (environments, caches, build output)."""
    found = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if any(p in _NOT_SOURCES or p.endswith(".egg-info") for p in parts):
            continue
        if path.is_file():
            found.append(path)
    return found


def test_nothing_outside_docs_refers_to_a_design_outside_the_repository() -> None:
    pattern = re.compile(r"DESIGN\.md|\.\./shared")
    offenders = [
        str(path.relative_to(ROOT))
        for path in _sources()
        if not path.is_relative_to(ROOT / "docs")
        and path.suffix in {".py", ".md", ".sh", ".toml", ".txt", ".cfg", ".proto", ""}
        and pattern.search(path.read_text(errors="replace"))
    ]
    assert offenders == []


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    broken = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for target in _LINK.findall(page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # http:, https:, mailto:
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_the_readme_fits_on_a_screen() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def _families(collector: object) -> set[str]:
    collect = collector.collect  # type: ignore[attr-defined]
    return {family.name for family in collect()}


def test_every_exported_metric_is_documented(tmp_path: Path) -> None:
    metrics = ControllerMetrics("kraft")
    names = _families(metrics.registry)
    names |= _families(ControllerStateCollector(lambda: 1, lambda _timeout: ControllerSnapshot()))
    with in_process_broker(tmp_path) as broker:
        broker.hosting.assign([(TopicIdPartition(uuid.uuid4(), "t", 0), {}, 0)])
        assert broker.rlm is not None
        names |= _families(TieredStorageCollector(broker.data, broker.rlm.metrics))
    page = (ROOT / "docs" / "operations" / "metrics.md").read_text().lower()
    assert len(names) > 20
    assert sorted(n for n in names if n.lower() not in page) == []


def test_test_folders_mirror_the_packages_they_test() -> None:
    tests = ROOT / "tests"
    folders = {p.parent for p in tests.rglob("test_*.py")} - {tests}
    unmatched = sorted(
        str(folder.relative_to(ROOT))
        for folder in folders
        if not (ROOT / folder.relative_to(tests)).is_dir()
    )
    assert unmatched == []
