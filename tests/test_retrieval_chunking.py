"""Chunking, query building and passage trimming: no model, no store."""
from __future__ import annotations

import pytest

from agent.retrieval.chunking import chunk_cpp, chunk_markdown, declaration_symbol
from agent.retrieval.query import Passage, _dedupe, build_query, trim_to_budget

CPP = r'''/***************************************************************************************************
 * Copyright notice that must not be attached to anything.
 **************************************************************************************************/
#pragma once
#include <cute/config.hpp>
#if defined(A_VERY_LONG_CONDITION) || \
    defined(ANOTHER_CONDITION)
#  define HAS_THING 1
#endif

namespace cute
{
namespace detail {

// Picks the widest vector the alignment allows.
// Second comment line.
template <class T, int N = sizeof(T)>
struct VectorPicker {
  using type = T;
  static constexpr int value = N;   // braces in comments { do not count
  char const* s = "}";              // nor in strings
};

/// A short alias
using half8 = VectorPicker<short, 16>;

template <int S>
CUTE_HOST_DEVICE constexpr
auto
make_thing(int x,
           int y)
{
#if defined(__CUDA_ARCH__)
  return x + y + S;
#else
  return x - y;
#endif
}

template <>
struct VectorPicker<float, 4> : VectorPicker<int> {};

} // namespace detail
} // end namespace cute
'''


def test_cpp_declarations_with_comments_and_lines():
    # a chunk's line is its first line, the leading comment included
    chunks = chunk_cpp(CPP, "cute/demo.hpp")
    syms = [(c.symbol, c.decl, c.line) for c in chunks]
    assert syms == [("VectorPicker", "struct", 15), ("half8", "alias", 24), ("make_thing", "function", 27),
                    ("VectorPicker<float, 4>", "struct", 40)]
    first = chunks[0]
    assert first.text.startswith("// Picks the widest vector")
    assert "Copyright" not in first.text and "#include" not in first.text
    assert first.text.rstrip().endswith("};")
    assert "Picks the widest vector the alignment allows." in first.embed_text
    assert first.embed_text.startswith("cute/demo.hpp struct VectorPicker")
    assert chunks[1].text.startswith("/// A short alias")
    # the #if inside the function body stays in its text and does not end it
    assert "#else" in chunks[2].text and chunks[2].text.rstrip().endswith("}")
    assert all(c.kind == "header" and c.source == "cute/demo.hpp" for c in chunks)


def test_long_declaration_is_split_at_member_boundaries():
    members = "\n".join(f"  int member_{i} = {i};  // field number {i}" for i in range(200))
    src = f"namespace x {{\nstruct Big {{\n{members}\n}};\n}}\n"
    chunks = chunk_cpp(src, "big.hpp", max_chars=1500)
    assert len(chunks) > 3
    assert all(c.symbol == "Big" for c in chunks)
    assert all(len(c.text) <= 1500 * 1.5 + 100 for c in chunks)
    assert chunks[1].text.startswith("// ... continued: Big (part 2)")
    assert chunks[0].line == 2 and chunks[1].line > chunks[0].line
    joined = "".join(chunks[i].text for i in range(len(chunks)))
    assert "member_0 " in joined and "member_199 " in joined


@pytest.mark.parametrize("code,expected", [
    ("template <class T> struct Foo<T, int> : Bar {", ("Foo<T, int>", "struct")),
    ("class alignas(16) Vec {", ("Vec", "class")),
    ("using Layout_K = ComposedLayout<Swizzle<3,4,3>, X>;", ("Layout_K", "alias")),
    ("CUTE_HOST_DEVICE constexpr auto make_layout(Shape const& s) {", ("make_layout", "function")),
    ("bool operator==(A const& a, B const& b) {", ("operator==", "function")),
    ("static constexpr int kStages = 4;", ("kStages", "variable")),
    ("enum class RasterOrder { AlongM, AlongN };", ("RasterOrder", "enum")),
])
def test_declaration_symbol(code, expected):
    assert declaration_symbol(code) == expected


def test_markdown_split_keeps_title_and_fences():
    body = "\n".join(f"Paragraph {i} " + "word " * 40 + "\n" for i in range(12))
    md = f"# Page title\n\nIntro line.\n\n## First\n\n{body}\n```cpp\nint x = 0;\n\nint y = 1;\n```\n\n## Second\n\nShort.\n"
    chunks = chunk_markdown(md, "retrieval_corpus/p.md", max_chars=800)
    assert len(chunks) >= 3
    assert all(c.text.startswith("# Page title") for c in chunks)
    assert any(c.symbol == "Page title — Second" for c in chunks)
    for c in chunks:  # a fence is never cut in half
        assert c.text.count("```") % 2 == 0
    small = chunk_markdown("# Tiny\n\nOne fact.\n", "retrieval_corpus/t.md")
    assert len(small) == 1 and small[0].symbol == "Tiny" and small[0].decl == "page"
    assert chunk_markdown("\n\n", "x.md") == []


def test_build_query_facets():
    q = build_query((64, 4096, 4096), family="cute_sm80_multistage", params={"BM": 64, "BN": 128, "stages": 3},
                    bottleneck="dram throughput high, long_scoreboard stalls")
    lines = q.splitlines()
    assert lines[0].startswith("NCU bottleneck") and "memory bound" in lines[0] and "long scoreboard" in lines[0]
    assert "M=64 N=4096 K=4096" in q
    assert "skinny" in q and "cp.async multistage" in q and "stages=3" in q
    big = build_query([8192, 8192, 8192])
    assert "wgmma" in big and "NCU" not in big
    odd = build_query((1000, 4097, 777), bottleneck={"smem_bank_conflicts": 1200, "spills": 0})
    assert "padding" in odd and "not a multiple of 8" in odd and "bank conflicts" in odd and "spills to" not in odd
    with pytest.raises(ValueError, match="three integers"):
        build_query((1, 2))
    with pytest.raises(ValueError, match="positive"):
        build_query((0, 2, 3))


def _p(text, source="s.md", symbol="x", score=0.5):
    return Passage(text=text, source=source, symbol=symbol, line=1, score=score, kind="note")


def test_dedupe_and_budget():
    ps = [_p("alpha  beta", "a.md", "A"), _p("Alpha beta", "b.md", "B"), _p("gamma", "a.md", "A"),
          _p("delta", "a.md", "C"), _p("eps", "a.md", "D"), _p("zeta", "c.md", "Z")]
    out = _dedupe(ps)
    assert [(p.source, p.symbol) for p in out] == [("a.md", "A"), ("a.md", "C"), ("c.md", "Z")]
    long = [_p("line of text\n" * 100, "l.md", "L"), _p("y" * 400, "m.md", "M")]
    trimmed = trim_to_budget(long, 200)
    assert len(trimmed) == 1 and trimmed[0].text.endswith("…") and len(trimmed[0].text) <= 200 * 4
    fits = trim_to_budget([_p("x" * 40), _p("y" * 40, symbol="y")], 20)
    assert [len(p.text) for p in fits] == [40, 40]
    with pytest.raises(ValueError):
        trim_to_budget(fits, 0)
