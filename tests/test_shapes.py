import pytest

from agent.shapes import ShapeFileError, load_shapes, parse_shapes


def test_formats_comments_and_blank_lines(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("# header\n64 64 64\n\n128,256,512   # trailing comment\n 4096x4096x4096\n8 16 32\n")
    assert load_shapes(f) == [(64, 64, 64), (128, 256, 512), (4096, 4096, 4096), (8, 16, 32)]


@pytest.mark.parametrize("text,line,needle", [
    ("64 64 64\n64 64\n", 2, "three integers"),
    ("64 64 64\n\n# c\n64 a 64\n", 4, "N is not an integer"),
    ("64 64 0\n", 1, "K must be positive"),
    ("64 64 -3\n", 1, "K must be positive"),
    ("64 64 64 64\n", 1, "found 4"),
    ("1 2 3\n70000 1 1\n", 2, "65536"),
    ("64 64 64\n32 32 32\n64x64x64\n", 3, "duplicate of the shape on line 1"),
    ("64 64 1.5\n", 1, "K is not an integer"),
])
def test_errors_name_the_line(tmp_path, text, line, needle):
    f = tmp_path / "bad.txt"
    f.write_text(text)
    with pytest.raises(ShapeFileError) as ei:
        load_shapes(f)
    assert ei.value.line == line
    assert needle in str(ei.value)
    assert f"{f}:{line}:" in str(ei.value)


def test_empty_missing_and_binary(tmp_path):
    with pytest.raises(ShapeFileError, match="no shapes"):
        parse_shapes("# only a comment\n\n", "x.txt")
    with pytest.raises(ShapeFileError, match="file not found"):
        load_shapes(tmp_path / "nope.txt")
    b = tmp_path / "b.bin"
    b.write_bytes(b"\xff\xfe\x00\x81")
    with pytest.raises(ShapeFileError, match="not a text file"):
        load_shapes(b)


def test_shipped_example_parses():
    from pathlib import Path

    shapes = load_shapes(Path(__file__).resolve().parents[1] / "examples" / "shapes_small.txt")
    assert 2 <= len(shapes) <= 3
