"""Real engine output in ``tests/data/engines``, read as stored (with our ``#`` source header)
and as the engine wrote it (without the header): what every ingest test of a fixture does."""

from __future__ import annotations

from pathlib import Path

from breakeven.iotools.ingest import ingest

DATA = Path(__file__).parent / "data" / "engines"


def as_written(path: Path, tmp_path: Path, name: str = "as_written.txt") -> Path:
    """The fixture without our '#' source header, as the engine wrote it."""
    body = path.read_text().splitlines(keepends=True)
    while body and body[0].startswith("#"):
        body.pop(0)
    out = tmp_path / name
    out.write_text("".join(body))
    return out


def both(path: Path, tmp_path: Path, **kwargs) -> list[list[dict]]:
    """The records of the fixture, and of the fixture as the engine wrote it."""
    return [ingest([p], **kwargs).records for p in (path, as_written(path, tmp_path))]


def header_lines(path: Path) -> int:
    """The lines of our header (``#`` lines) in a fixture: what a record's line number moves
    by once the header is gone."""
    return sum(1 for line in path.read_text().splitlines() if line.startswith("#"))
