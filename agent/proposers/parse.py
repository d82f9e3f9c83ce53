"""Turn a model's reply into a contract `.cu` source, or a clear reason why not.

Accepted forms, tried in this order:
1. SEARCH/REPLACE edits against the parent variant's source:
       <<<<<<< SEARCH
       old lines
       =======
       new lines
       >>>>>>> REPLACE
2. a fenced code block (```cuda, ```cu, ```cpp, ```c++, ```c or bare ```); when there are several, the one that
   defines `hgemm` (the longest of those);
3. the whole reply, when it is plainly a source file (starts with a preprocessor line, a comment or `extern "C"`).
Whatever the form, the result must define the contract symbol `extern "C" ... hgemm(`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from evaluator.contract import MAX_SOURCE_BYTES, SYMBOL


@dataclass
class ParseResult:
    source: str | None
    reason: str  # "" on success
    kind: str  # edit | fenced | whole | none

    @property
    def ok(self) -> bool:
        return self.source is not None


_FENCE = re.compile(r"^```[ \t]*([A-Za-z0-9+_-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_FENCE_LINE = re.compile(r"^```", re.MULTILINE)
_CODE_LANGS = {"", "cuda", "cu", "cpp", "c++", "cxx", "c", "cc", "h", "hpp", "cuh"}
_EDIT = re.compile(r"^<{5,9} ?SEARCH[ \t]*\n(.*?)^={5,9}[ \t]*\n(.*?)^>{5,9} ?REPLACE[ \t]*$",
                   re.MULTILINE | re.DOTALL)
_EXTERN_C = re.compile(r'extern\s+"C"')
_DEFINES_SYMBOL = re.compile(r"\b" + SYMBOL + r"\s*\([^;{]*\)\s*\{", re.DOTALL)
_LOOKS_LIKE_SOURCE = re.compile(r'^\s*(#\s*(include|pragma|define|if)|//|/\*|extern\s+"C"|template\s*<|namespace\s)')


def has_contract_symbol(source: str) -> bool:
    return bool(_EXTERN_C.search(source)) and bool(_DEFINES_SYMBOL.search(source))


def _check(source: str, kind: str, label: str | None = None) -> ParseResult:
    label = label or kind
    source = source.strip("\n") + "\n"
    if len(source.encode()) > MAX_SOURCE_BYTES:
        return ParseResult(None, f"the kernel is {len(source.encode())} bytes, over the {MAX_SOURCE_BYTES}-byte "
                                 "limit", kind)
    if not has_contract_symbol(source):
        return ParseResult(None, f'the {label} code does not define the contract symbol: extern "C" int '
                                 f"{SYMBOL}(const half* A, const half* B, const half* B_col_major, half* C, "
                                 "int M, int N, int K, cudaStream_t stream) { ... }", kind)
    return ParseResult(source, "", kind)


def apply_edits(parent: str, edits: list[tuple[str, str]]) -> tuple[str | None, str]:
    """Apply SEARCH/REPLACE pairs in order. Exact match first, then a match that ignores trailing whitespace."""
    out = parent
    for i, (search, replace) in enumerate(edits, 1):
        if search == "":
            return None, f"SEARCH block {i} is empty"
        count = out.count(search)
        if count == 1:
            out = out.replace(search, replace, 1)
            continue
        if count > 1:
            return None, f"SEARCH block {i} matches {count} places in the parent; it must match exactly one"
        # Models often drop or add trailing spaces; match line by line on rstripped text.
        lines = out.split("\n")
        want = [ln.rstrip() for ln in search.rstrip("\n").split("\n")]
        norm = [ln.rstrip() for ln in lines]
        hits = [j for j in range(len(norm) - len(want) + 1) if norm[j:j + len(want)] == want]
        if len(hits) != 1:
            first = search.strip().splitlines()[0][:80] if search.strip() else ""
            what = "not found in" if not hits else f"found {len(hits)} times in"
            return None, f"SEARCH block {i} ({first!r}...) {what} the parent source"
        j = hits[0]
        new_lines = replace.rstrip("\n").split("\n") if replace.strip("\n") else []
        lines[j:j + len(want)] = new_lines
        out = "\n".join(lines)
    return out, ""


def parse_reply(text: str | None, parent_source: str | None = None) -> ParseResult:
    if text is None or not text.strip():
        return ParseResult(None, "empty reply", "none")
    edits = [(m.group(1), m.group(2)) for m in _EDIT.finditer(text)]
    if edits:
        if not parent_source:
            return ParseResult(None, "the reply is a SEARCH/REPLACE edit but there is no parent variant to apply "
                                     "it to", "edit")
        src, why = apply_edits(parent_source, edits)
        if src is None:
            return ParseResult(None, why, "edit")
        return _check(src, "edit", "edited")
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    code = [b for lang, b in blocks if lang in _CODE_LANGS]
    if code:
        with_symbol = [b for b in code if SYMBOL in b]
        return _check(max(with_symbol or code, key=len), "fenced")
    if len(_FENCE_LINE.findall(text)) % 2 == 1:
        return ParseResult(None, "the reply opens a code block that is never closed (cut off at max_tokens?)",
                           "fenced")
    if blocks:
        langs = ", ".join(sorted({lang or "plain" for lang, _ in blocks}))
        return ParseResult(None, f"the reply's code blocks are not CUDA/C++ (languages: {langs})", "fenced")
    if _LOOKS_LIKE_SOURCE.match(text):
        return _check(text, "whole-file")
    return ParseResult(None, "no kernel in the reply: no fenced ```cuda block, no whole-file source and no "
                             "SEARCH/REPLACE edit", "none")


_SUMMARY = re.compile(r"^[ \t>*_#-]*summary[*_]*[ \t]*[:\-][*_]*[ \t]*(.+?)[ \t*_]*$", re.IGNORECASE | re.MULTILINE)
SUMMARY_CHARS = 120


def reply_summary(text: str | None) -> str:
    """The one-line `Summary: ...` the prompt asks a reply to open with ("" when there is none); it describes
    the variant in later prompts' tables."""
    if not text:
        return ""
    m = _SUMMARY.search(text[:4000])
    if not m:
        return ""
    s = " ".join(m.group(1).split()).strip("`*_ ")
    return s if len(s) <= SUMMARY_CHARS else s[: SUMMARY_CHARS - 3] + "..."
