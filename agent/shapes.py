"""Shape lists: the input of a campaign.

One shape per line as three positive integers M N K, separated by spaces, commas or 'x' (``4096 4096 4096``,
``4096,4096,4096`` and ``4096x4096x4096`` all work). ``#`` starts a comment; blank lines are skipped. Every problem
is reported with the file name and line number, because a campaign may run for hours and a typo found late costs
that much.
"""
from __future__ import annotations

import re
from pathlib import Path

from evaluator.contract import check_shape

Shape = tuple[int, int, int]

_SPLIT = re.compile(r"[\s,xX*]+")


class ShapeFileError(ValueError):
    def __init__(self, path: str, line: int | None, reason: str, text: str = ""):
        self.path, self.line, self.reason, self.text = path, line, reason, text
        where = f"{path}:{line}" if line is not None else path
        shown = f": {text.strip()!r}" if text.strip() else ""
        super().__init__(f"{where}: {reason}{shown}")


def parse_shape_line(text: str) -> Shape:
    """One 'M N K' entry (comment already removed) to a checked shape; ValueError says what is wrong."""
    parts = [p for p in _SPLIT.split(text.strip()) if p]
    if len(parts) != 3:
        raise ValueError(f"expected three integers M N K, found {len(parts)} field(s)")
    values = []
    for name, p in zip("MNK", parts):
        try:
            values.append(int(p, 10))
        except ValueError:
            raise ValueError(f"{name} is not an integer ({p!r})") from None
    return check_shape(values)


def parse_shapes(text: str, path: str = "<shapes>") -> list[Shape]:
    shapes: list[Shape] = []
    seen: dict[Shape, int] = {}
    for lineno, raw in enumerate(text.splitlines(), start=1):
        body = raw.split("#", 1)[0]
        if not body.strip():
            continue
        try:
            shape = parse_shape_line(body)
        except ValueError as e:
            raise ShapeFileError(path, lineno, str(e), raw) from None
        if shape in seen:
            raise ShapeFileError(path, lineno, f"duplicate of the shape on line {seen[shape]}", raw)
        seen[shape] = lineno
        shapes.append(shape)
    if not shapes:
        raise ShapeFileError(path, None, "no shapes in the file (one 'M N K' per line expected)")
    return shapes


def load_shapes(path: str | Path) -> list[Shape]:
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ShapeFileError(str(path), None, "file not found") from None
    except IsADirectoryError:
        raise ShapeFileError(str(path), None, "is a directory, not a shape file") from None
    except UnicodeDecodeError as e:
        raise ShapeFileError(str(path), None, f"not a text file ({e.reason})") from None
    return parse_shapes(text, str(path))


def shape_str(shape: Shape) -> str:
    return "x".join(str(v) for v in shape)


def shape_dir(shape: Shape) -> str:
    """The folder/file stem used for a shape everywhere (archive exports, report links)."""
    return "_".join(str(v) for v in shape)
