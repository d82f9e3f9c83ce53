"""Split sources into retrieval chunks: C++ headers at declarations, markdown notes at sections.

The C++ splitter is a brace scanner, not a parser: it is enough to find where a top-level declaration (inside any
number of namespaces) starts and ends, which is all retrieval needs. Namespace and `extern "C"` braces do not
count as nesting, so `namespace cute { struct X {...}; }` yields `X`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# Declarations longer than this are split at member boundaries so that each piece is embeddable and fits a prompt.
MAX_CHUNK_CHARS = 3000
# Sections of notes longer than this are split at paragraph breaks.
MAX_NOTE_CHARS = 1600


@dataclass
class Chunk:
    text: str  # what a prompt shows
    embed_text: str  # what is embedded: text with its location and symbol in front, so names match queries
    source: str  # file relative to its root, e.g. cute/layout.hpp or retrieval_corpus/swizzle.md
    symbol: str
    line: int  # 1-based first line
    kind: str  # note | header | extra
    decl: str = ""  # struct, class, function, alias, ... (headers); section (notes)
    extra: dict = field(default_factory=dict)


# ---------------------------------------------------------------- C++ -----------------------------------------------

_NAMESPACE_OPEN = re.compile(r'^\s*(inline\s+)?namespace\b[^;{]*\{|^\s*extern\s+"C(\+\+)?"\s*\{')
_RECORD = re.compile(r'\b(struct|class|union|enum\s+class|enum\s+struct|enum)\s+(?:alignas\s*\([^)]*\)\s*)?'
                     r'(?:CUTLASS_\w+\s+|CUTE_\w+\s+|__\w+__\s+)*([A-Za-z_]\w*)')
_USING = re.compile(r'\busing\s+([A-Za-z_]\w*)\s*=')
_TYPEDEF = re.compile(r'\btypedef\b.*?([A-Za-z_]\w*)\s*;', re.S)
_OPERATOR = re.compile(r'\boperator\s*(\(\)|\[\]|[^\s(]+)\s*\(')
_IDENT_BEFORE_PAREN = re.compile(r'([A-Za-z_~][\w:]*)\s*(?:<[^()]*>)?\s*\($')


def _strip_code(line: str, in_block: bool) -> tuple[str, bool]:
    """The line without comments and string/char literals (so braces inside them are not counted)."""
    out = []
    i, n = 0, len(line)
    while i < n:
        if in_block:
            j = line.find("*/", i)
            if j < 0:
                return "".join(out), True
            i, in_block = j + 2, False
            continue
        c = line[i]
        if c == "/" and line.startswith("//", i):
            break
        if c == "/" and line.startswith("/*", i):
            in_block, i = True, i + 2
            continue
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if line[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), in_block


def _skip_template_prefix(head: str) -> str:
    """`template <class T, int N = f<3>()> struct X` -> `struct X` (balanced angle brackets)."""
    while True:
        m = re.match(r"\s*template\s*<", head)
        if not m:
            return head
        depth, i = 1, m.end()
        while i < len(head) and depth:
            if head[i] == "<":
                depth += 1
            elif head[i] == ">":
                depth -= 1
            i += 1
        head = head[i:]


def _angle_suffix(s: str, start: int) -> str:
    """Template arguments right after a name (a specialisation), balanced, or ''."""
    i = start
    while i < len(s) and s[i].isspace():
        i += 1
    if i >= len(s) or s[i] != "<":
        return ""
    depth, j = 0, i
    while j < len(s):
        if s[j] == "<":
            depth += 1
        elif s[j] == ">":
            depth -= 1
            if depth == 0:
                return re.sub(r"\s+", " ", s[i:j + 1])[:160]
        elif s[j] in "{;":
            break
        j += 1
    return ""


def declaration_symbol(code: str) -> tuple[str, str]:
    """(symbol, decl kind) of a declaration's code (comments removed); ('', 'other') if none is recognisable."""
    head_end = len(code)
    for ch in "{;":
        k = code.find(ch)
        if 0 <= k < head_end:
            head_end = k
    head = _skip_template_prefix(code[:head_end + 1])
    head = re.sub(r"\s+", " ", head).strip()
    m = _USING.search(head)
    if m and head.lstrip().startswith("using"):
        return m.group(1), "alias"
    # A record: struct/class/... name, unless it is a function returning `struct X` (a '(' before the name).
    m = _RECORD.search(head)
    if m and "(" not in head[: m.start()]:
        name = m.group(2)
        return name + _angle_suffix(head, m.end()), m.group(1).split()[0]
    if head.startswith("typedef"):
        m = _TYPEDEF.search(head)
        if m:
            return m.group(1), "alias"
    m = _OPERATOR.search(head)
    if m:
        return "operator" + m.group(1), "function"
    paren = _first_paren_at_angle_zero(head)
    if paren >= 0:
        m = _IDENT_BEFORE_PAREN.search(head[: paren + 1])
        if m:
            name = m.group(1)
            if name not in {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignas", "static_assert",
                            "CUTE_STATIC_ASSERT", "CUTE_STATIC_ASSERT_V", "static_assert"}:
                return name, "function"
            if name.startswith("static_assert") or name.startswith("CUTE_STATIC_ASSERT"):
                return "", "static_assert"
    m = re.search(r"([A-Za-z_]\w*)\s*(=|\{|;|\[)", head)
    if m:
        return m.group(1), "variable"
    return "", "other"


def _first_paren_at_angle_zero(head: str) -> int:
    depth = 0
    for i, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif c == "(" and depth == 0:
            return i
    return -1


def _is_comment_line(s: str) -> bool:
    s = s.strip()
    return s.startswith("//") or s.startswith("/*") or s.startswith("*") or s.endswith("*/")


def _is_separator_comment(s: str) -> bool:
    """Decorative rules like //////////// carry no meaning."""
    body = s.strip().lstrip("/").strip()
    return not body or set(body) <= set("/*-=#")


def chunk_cpp(text: str, source: str, kind: str = "header", max_chars: int = MAX_CHUNK_CHARS) -> list[Chunk]:
    """Top-level declarations of a C++ file, each with the comment right above it."""
    lines = text.splitlines()
    chunks: list[Chunk] = []
    stack: list[str] = []  # 'ns' for namespace braces, 'b' for any other brace
    in_block = False
    decl_start: int | None = None  # line index where the current declaration (with its comment) starts
    code_start: int | None = None
    comment_start: int | None = None  # first line of a comment block seen at depth 0 while no declaration is open
    pending_open_ns = False
    depth_at_end: list[int] = []  # non-namespace depth after each line, for splitting long declarations
    paren = 0

    def depth() -> int:
        return sum(1 for x in stack if x == "b")

    def close(end: int) -> None:
        nonlocal decl_start, code_start
        if decl_start is not None and code_start is not None:
            _emit(chunks, lines, decl_start, code_start, end, source, kind, max_chars, depth_at_end)
        decl_start = code_start = None

    in_directive = False  # inside a preprocessor directive continued with backslashes
    for idx, raw in enumerate(lines):
        if in_directive or (not in_block and raw.lstrip().startswith("#")):
            # Directives never count towards braces or declaration boundaries; a declaration open across an #if
            # keeps the directive lines in its text.
            in_directive = raw.rstrip().endswith("\\")
            depth_at_end.append(depth())
            if decl_start is None:
                comment_start = None
            continue
        code, in_block_after = _strip_code(raw, in_block)
        was_in_block = in_block
        in_block = in_block_after
        stripped = raw.strip()
        d0 = depth()
        if decl_start is None and d0 == 0:
            if not stripped:
                comment_start = None
                depth_at_end.append(d0)
                continue
            if stripped.startswith("#"):
                comment_start = None
                depth_at_end.append(d0)
                continue
            if was_in_block or (not code.strip() and _is_comment_line(raw)):
                if _is_separator_comment(raw):
                    pass  # rules (////) and bare ` *` lines neither start nor end a comment block
                elif comment_start is None:
                    comment_start = idx
                depth_at_end.append(d0)
                continue
            if _NAMESPACE_OPEN.match(code) or re.match(r"^\s*(inline\s+)?namespace\b[^;{]*$", code):
                # `namespace x {` or a namespace whose brace is on the next line
                comment_start = None
                pending_open_ns = "{" not in code
                if "{" in code:
                    stack.append("ns")
                    rest = code[code.index("{") + 1:]
                    for c in rest:  # `namespace a { namespace b {` on one line
                        if c == "{":
                            stack.append("ns")
                        elif c == "}" and stack:
                            stack.pop()
                depth_at_end.append(depth())
                continue
            if pending_open_ns and code.strip().startswith("{"):
                pending_open_ns = False
                stack.append("ns")
                depth_at_end.append(depth())
                continue
            if code.strip().startswith("}"):
                # closes a namespace (or a stray brace)
                if stack:
                    stack.pop()
                depth_at_end.append(depth())
                continue
            if not code.strip():
                depth_at_end.append(d0)
                continue
            decl_start = comment_start if comment_start is not None else idx
            code_start = idx
            comment_start = None
            paren = 0
        if decl_start is None:
            depth_at_end.append(d0)
            continue
        ended = False
        for c in code:
            if c == "(":
                paren += 1
            elif c == ")":
                paren = max(0, paren - 1)
            elif c == "{":
                stack.append("b")
            elif c == "}":
                if stack:
                    stack.pop()
                if depth() == 0 and not code.rstrip().endswith(",") and paren == 0:
                    ended = True  # a body closed; a trailing `;` on the same line belongs to it
            elif c == ";" and depth() == 0 and paren == 0:
                ended = True
        depth_at_end.append(depth())
        if ended and depth() == 0:
            # `struct X {...}` followed by `;` or a variable on the next line is rare in these headers; accept.
            close(idx)
    close(len(lines) - 1)
    return chunks


def _emit(chunks: list[Chunk], lines: list[str], start: int, code_start: int, end: int, source: str, kind: str,
          max_chars: int, depth_at_end: list[int]) -> None:
    body = "\n".join(lines[start:end + 1]).strip("\n")
    if not body.strip():
        return
    code_only = "\n".join(_strip_code(ln, False)[0] for ln in lines[code_start:end + 1])
    symbol, decl = declaration_symbol(code_only)
    if decl in ("static_assert", "other") and not symbol:
        return  # stray statements (static_asserts, macro invocations) are not worth a chunk
    if symbol in ("", "CUTE_HOST_DEVICE"):
        symbol = decl
    comment = "\n".join(lines[start:code_start]).strip()
    if len(body) <= max_chars:
        chunks.append(_header_chunk(body, comment, source, symbol, decl, start + 1, kind))
        return
    # Split a long declaration at lines where its body returns to member level (depth 1), packing pieces greedily.
    head_line = _code_embed_text(body, comment, source, symbol, decl).split("\n")[-1][:200]
    piece_start, part = start, 1
    size = 0
    for i in range(start, end + 1):
        size += len(lines[i]) + 1
        at_member_end = i < len(depth_at_end) and depth_at_end[i] <= 1 and lines[i].rstrip().endswith((";", "}", "};"))
        if (size >= max_chars * 0.6 and at_member_end) or size >= max_chars * 1.5 or i == end:
            text = "\n".join(lines[piece_start:i + 1]).strip("\n")
            if text.strip():
                if part > 1:
                    text = f"// ... continued: {symbol} (part {part})\n" + text
                chunks.append(_header_chunk(text, comment if part == 1 else "", source, symbol, decl, piece_start + 1,
                                            kind, head=head_line if part > 1 else ""))
                part += 1
            piece_start, size = i + 1, 0


def _header_chunk(text: str, comment: str, source: str, symbol: str, decl: str, line: int, kind: str,
                  head: str = "") -> Chunk:
    return Chunk(text=text, embed_text=_code_embed_text(text, comment, source, symbol, decl, head), source=source,
                 symbol=symbol, line=line, kind=kind, decl=decl)


def _code_embed_text(text: str, comment: str, source: str, symbol: str, decl: str, head: str = "") -> str:
    """Where, what and why of a declaration, without its body: name, comment and signature carry the meaning a
    query can match, and a short text embeds several times faster than a template body."""
    words = _split_identifier(symbol)
    prose = " ".join(ln.strip().lstrip("/*!<").strip() for ln in comment.splitlines())
    prose = re.sub(r"\s+", " ", prose).strip()[:400]
    body = text.split("\n", len(comment.splitlines()))[-1] if comment else text
    code = re.sub(r"\s+", " ", " ".join(_strip_code(ln, False)[0] for ln in body.splitlines()[:40]))
    cut = min([i for i in (code.find("{"), code.find(";")) if i >= 0] or [len(code)])
    sig = _skip_template_prefix(code[: cut + 1])
    sig_text = re.sub(r"\b(CUTE|CUTLASS)_[A-Z_]+\b|\b(constexpr|inline|static|__forceinline__|__device__|__host__)\b",
                      " ", sig)
    sig_text = re.sub(r"\s+", " ", sig_text).strip()[:300]
    rest = re.sub(r"\s+", " ", " ".join(ln.strip() for ln in body.splitlines()[:30]))
    after = rest[rest.find("{") + 1:] if cut < len(code) and code[cut] == "{" and "{" in rest else ""
    if after:
        sig_text += " " + after[:250]
    parts = [f"{source} {decl} {symbol[:120]} ({words})"]
    if head:
        parts.append(head[:200])
    if prose:
        parts.append(prose)
    parts.append(sig_text)
    return "\n".join(parts)


def _split_identifier(name: str) -> str:
    """make_tiled_copy -> 'make tiled copy'; SM80_CP_ASYNC -> 'SM80 CP ASYNC'; TiledMMA -> 'Tiled MMA'."""
    base = re.sub(r"<.*", "", name)
    base = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", base)
    return re.sub(r"[_:]+", " ", base).strip()


# --------------------------------------------------------------- notes ----------------------------------------------

def chunk_markdown(text: str, source: str, kind: str = "note", max_chars: int = MAX_NOTE_CHARS) -> list[Chunk]:
    """A note split at `## ` headings; each piece carries the page title so it stands alone."""
    lines = text.splitlines()
    title = ""
    for ln in lines:
        if ln.strip():
            title = ln.strip().lstrip("#").strip()
            break
    if not title:
        return []
    sections: list[tuple[str, int, list[str]]] = []  # (heading, first line, lines)
    cur_head, cur_line, cur = "", 1, []
    in_fence = False
    for i, ln in enumerate(lines):
        if ln.strip().startswith("```"):
            in_fence = not in_fence
        if not in_fence and re.match(r"^##\s+", ln):
            if any(x.strip() for x in cur):
                sections.append((cur_head, cur_line, cur))
            cur_head, cur_line, cur = ln.strip().lstrip("#").strip(), i + 1, [ln]
        else:
            cur.append(ln)
    if any(x.strip() for x in cur):
        sections.append((cur_head, cur_line, cur))
    whole = text.strip()
    if len(whole) <= max_chars:
        return [Chunk(text=whole, embed_text=whole, source=source, symbol=title, line=1, kind=kind, decl="page")]
    out = []
    for head, line, body in sections:
        for piece, off in _split_paragraphs(body, max_chars):
            sym = f"{title} — {head}" if head else title
            txt = piece if not head else piece
            prefix = f"# {title}\n" if head else ""
            out.append(Chunk(text=prefix + txt, embed_text=prefix + txt, source=source, symbol=sym,
                             line=line + off, kind=kind, decl="section"))
    return out


def _split_paragraphs(lines: list[str], max_chars: int) -> list[tuple[str, int]]:
    """Pack lines into pieces of at most max_chars, cutting at blank lines outside code fences."""
    pieces, cur, cur_off, size, in_fence = [], [], 0, 0, False
    for i, ln in enumerate(lines):
        if ln.strip().startswith("```"):
            in_fence = not in_fence
        cur.append(ln)
        size += len(ln) + 1
        if size >= max_chars and not in_fence and not ln.strip():
            pieces.append(("\n".join(cur).strip(), cur_off))
            cur, cur_off, size = [], i + 1, 0
    if "\n".join(cur).strip():
        pieces.append(("\n".join(cur).strip(), cur_off))
    return pieces
