"""Screening for cross-call state: what a candidate could keep from one call of `hgemm` to the next.

Timing calls a candidate many times on the same operands, so anything it remembers between calls (a fingerprint of
A and B, the pointers it saw, a call counter, the last C in a buffer of its own) can turn into a fake speedup. A
candidate keeps no state from one call to the next. This module refuses, with the line, what could hold such state:

- mutable host variables that outlive a call: namespace-scope (global) variables, function-local `static`s, static
  class members, and anything `thread_local`;
- `__managed__` variables, and non-const `__device__` globals that the code writes;
- memory kept between calls: a `cudaMalloc*` without a matching free in the same function (a pointer stored in a
  static or global is refused as that static or global).

Two layers, like the rest of the screen. `state_reasons(source)` reads the text (comments and strings blanked, so
line numbers agree). `state_symbol_reasons(obj, source)` reads the object after `nvcc -c`: writable host data and
bss symbols (`b B d D u V v C`) are exactly the state the code keeps, whatever macro spelled it, and a `__device__`
global has a host shadow symbol there too. Symbols of the toolkits' headers (CUDA, CUTLASS/CuTe, the C++ library)
and the compiler's own registration symbols are ignored; the rest are the candidate's, mapped back to a source line
by name.

What is allowed is narrow and named (ALLOWED below, also in docs/evaluator.md). The run-time checks back this up
for whatever slips through or abuses an allowance: timing never repeats operand contents, and the outputs of timed
calls are verified.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# ---------------------------------------------------------------------------------------------------- allowances

# name -> why it is safe. Each is matched narrowly (see _per_device_ok and _scratch_ok) and tested.
ALLOWED: dict[str, str] = {
    "per_device": "the per-device facts cache (`static Entry known[64]` in the project's `per_device` template, filled "
                  "by a `bool fill(int device, Entry&)` function): it holds device queries and one-time "
                  "cudaFuncSetAttribute results, and a fill function sees no operand or pointer",
    "release_stream": "the release adapter's stream slot (`static cudaStream_t stream = nullptr;` in namespace "
                      "`cl2_release`, scripts/release_adapter.py): hgemm sets it to its own `stream` and nothing else "
                      "writes it; it hands the stream to the release code's launches, which take no stream argument",
    "scratch": "split-K scratch: a namespace-scope `__device__` (or `__constant__`) array or scalar of plain numbers, "
               "no initializer, its "
               "declaration line annotated `// cudal2: scratch`; every call rewrites it before reading and its "
               "counters return to zero (the run-time checks catch one that keeps results)",
}

SCRATCH_ANNOTATION = re.compile(r"//\s*cudal2\s*:\s*scratch\b")

# The per_device template's text, whitespace-insensitive (comments already blanked); a test ties it to
# agent/families/per_device.cu.j2, so a change there fails the test instead of refusing every family.
PER_DEVICE_SHA = "da3b407fe3cdf592"

_NO_STATE = "a candidate keeps no state from one call to the next"
_STATE_WHY = f"host state kept between calls (a memo, call counter or cached buffer): {_NO_STATE}"
_MEMORY_WHY = "memory kept from one call to the next: allocate what a call needs and free it before returning " \
              "(cudaMallocAsync/cudaFreeAsync on `stream`), or use an annotated `__device__` scratch array"
_DEVICE_WHY = ("a writable __device__ global persists on the GPU between calls (a result or fingerprint could be kept "
               f"there): {_NO_STATE}; a read-only table is `__constant__` "
               "or `const`, and split-K scratch that every call rewrites is annotated `// cudal2: scratch`")

# ---------------------------------------------------------------------------------------------------- helpers


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _blank_preprocessor(code: str) -> str:
    """Blank directive lines (and their continuations): a macro body's braces are not scopes."""
    out = list(code)
    for m in re.finditer(r"^[ \t]*#", code, re.M):
        j = m.start()
        while j < len(code):
            if code[j] == "\n":
                if j > 0 and code[j - 1] == "\\":
                    j += 1
                    continue
                break
            out[j] = " "
            j += 1
    return "".join(out)


def _match_close(text: str, i: int, open_: str = "(", close: str = ")") -> int:
    """Index just past the bracket that closes the one at text[i]."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == open_:
            depth += 1
        elif text[j] == close:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(text)


def _strip_template_heads(s: str) -> str:
    """Drop leading `template <...>` clauses (angle brackets balanced)."""
    while True:
        m = re.match(r"\s*template\s*<", s)
        if not m:
            return s
        depth, j = 0, m.end() - 1
        while j < len(s):
            depth += {"<": 1, ">": -1}.get(s[j], 0)
            j += 1
            if depth == 0:
                break
        s = s[j:]


_ATTRS = re.compile(r"__attribute__\s*\(\(.*?\)\)|\[\[.*?\]\]|\b(?:alignas|__align__|__declspec|__launch_bounds__|"
                    r"__cluster_dims__|__maxnreg__|decltype|__builtin_align__)\s*\((?:[^()]|\([^()]*\))*\)", re.S)


def _clean(s: str) -> str:
    return _ATTRS.sub(lambda m: " " * len(m.group()), s)


def _one_line(s: str, limit: int = 90) -> str:
    s = re.sub(r"\s+", " ", s).strip()
    return s if len(s) <= limit else s[:limit - 3] + "..."


# ---------------------------------------------------------------------------------------------------- scopes


@dataclass
class _Func:
    start: int   # the body's `{`
    end: int     # just past its `}`
    name: str
    device: bool = False  # __global__ or __device__ (not __host__ __device__: that one also runs on the host)


@dataclass
class _Decl:
    pos: int          # where the declared name is
    name: str
    text: str         # the declaration up to the name's declarator, for messages
    scope: str        # "namespace", "class", "function"
    specifiers: str   # everything before the declarator names, cleaned
    declarator: str   # this name's declarator (pointer stars, name, array bounds, initializer)


def _scan(code: str) -> tuple[list[_Decl], list[_Func], list[tuple[int, int]]]:
    """Declarations at namespace and class scope, the outermost function bodies (for local statics) and the class
    bodies (a member allocated in a constructor is freed in the destructor)."""
    decls: list[_Decl] = []
    funcs: list[_Func] = []
    classes: list[tuple[int, int]] = []
    # stack entries: [kind, open position, function name, statement start of the enclosing scope]
    stack: list[list] = [["namespace", -1, "", 0]]
    stmt_start = 0
    elided: list[tuple[int, int]] = []  # class bodies inside the statement being read
    i, n = 0, len(code)
    while i < n:
        c = code[i]
        if c not in "{};":
            i += 1
            continue
        kind = stack[-1][0]
        if c == "{":
            if kind in ("function", "init"):
                stack.append([kind, i, stack[-1][2], stmt_start])
            else:
                head = _clean(_strip_template_heads(_elide(code, stmt_start, i, elided)))
                if re.search(r"\bnamespace\b", head) or re.fullmatch(r'\s*extern\s*"C"\s*', head):
                    stack.append(["namespace", i, "", stmt_start])
                    stmt_start, elided = i + 1, []
                elif re.search(r"(?<![=!<>])=(?!=)", head.split("(")[0]):
                    stack.append(["init", i, "", stmt_start])
                elif re.search(r"\b(?:struct|class|union|enum)\b", head) and "(" not in head:
                    stack.append(["class", i, "", stmt_start])
                    stmt_start, elided = i + 1, []
                elif (p := head.find("(")) >= 0 and "=" not in head[:p]:
                    name = re.findall(r"[A-Za-z_]\w*|operator\s*\S+", head[:p])
                    device = bool(re.search(r"\b(?:__global__|__device__)\b", head[:p])) and "__host__" not in head
                    stack.append(["function", i, (name[-1] if name else "", device), stmt_start])
                else:
                    stack.append(["init", i, "", stmt_start])  # a brace initializer: the statement goes on
        elif c == "}":
            if len(stack) == 1:
                i += 1
                continue
            k, opened, name, outer_start = stack.pop()
            if k == "function" and stack[-1][0] != "function":
                funcs.append(_Func(opened, i + 1, *name))
                stmt_start, elided = i + 1, []
            elif k == "namespace":
                stmt_start, elided = i + 1, []
            elif k == "class":
                classes.append((opened, i + 1))
                # `struct S {...} s;` declares s: the statement resumes after the body
                stmt_start = outer_start
                elided = [(a, b) for a, b in elided if a < opened] + [(opened, i + 1)]
        else:  # ;
            if kind in ("namespace", "class"):
                decls.extend(_declarations(code, stmt_start, i, elided, kind))
                stmt_start, elided = i + 1, []
        i += 1
    return decls, funcs, classes


def _elide(code: str, a: int, b: int, elided: list[tuple[int, int]]) -> str:
    """code[a:b] with the given bodies blanked (same length)."""
    s = list(code[a:b])
    for x, y in elided:
        for j in range(max(x, a), min(y, b)):
            if s[j - a] != "\n":
                s[j - a] = " "
        if a <= x and y <= b:
            s[x - a], s[y - 1 - a] = "{", "}"  # a marker: a type body stood here
    return "".join(s)


_SKIP_STMT = re.compile(r"\s*(?:typedef|using|static_assert|friend|namespace|template|extern\s+template|asm|"
                        r"__asm__|return|public|private|protected)\b")


def _split_top(s: str, sep: str = ",") -> list[tuple[int, str]]:
    """Split at `sep` outside (), [], {} and <> (offsets kept)."""
    parts, depth, start = [], 0, 0
    for j, ch in enumerate(s):
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth = max(0, depth - 1)
        elif ch == sep and depth == 0:
            parts.append((start, s[start:j]))
            start = j + 1
    parts.append((start, s[start:]))
    return parts


def _declarations(code: str, a: int, b: int, elided: list[tuple[int, int]], scope: str) -> list[_Decl]:
    raw = _elide(code, a, b, elided)
    s = _clean(raw)
    body = _strip_template_heads(s)
    off = a + len(s) - len(body)
    if not body.strip() or _SKIP_STMT.match(body):
        return []
    if re.fullmatch(r"\s*(?:struct|class|union|enum)\b[^=(]*", body) and not re.search(r"\}\s*[\w*&]", body):
        return []  # a definition or forward declaration of a type, no variable
    if scope == "class" and not re.search(r"\b(?:static|thread_local)\b", body):
        return []  # a non-static data member lives in an object, not across calls
    out = []
    first = True
    specifiers = ""
    for part_off, part in _split_top(body):
        if first:
            # the first declarator: the specifiers are what comes before its name
            m = _first_declarator(part, scope == "function")
            if m is None:
                return []
            specifiers, declarator, dpos = part[:m], part[m:], m
            first = False
        else:
            declarator, dpos = part, 0
        name_m = re.match(r"[\s*&(]*(?:const\s*)?(?:[\s*&]|const\b)*([A-Za-z_]\w*)", declarator)
        if not name_m:
            continue
        decl_pos = off + part_off + dpos + name_m.start(1)
        out.append(_Decl(decl_pos, name_m.group(1), _one_line(body), scope, specifiers, declarator))
    return out


def _first_declarator(part: str, in_function: bool = False) -> int | None:
    """Where the first declarator starts in a declaration, or None when it declares a function (or is something
    this reader does not know, such as a macro invocation: the object layer still sees what it expands to)."""
    body = re.match(r"[^={(]*\b(?:struct|class|union|enum)\b[^={(]*\{\s*\}", part)
    base = body.end() if body else 0  # `struct S {...} s;` declares s
    eq = re.search(r"(?<![=!<>])=(?!=)", part[base:])
    head = part[base:base + eq.start()] if eq else part[base:]
    paren = head.find("(")
    if paren >= 0 and re.match(r"\(\s*[*&]+\s*(?:const\s+)?[A-Za-z_]\w*\s*\)", head[paren:]):
        return base + paren  # a pointer to a function or an array: `int (*fp)(int)`
    if paren >= 0 and not in_function:
        return None  # a function declaration (a direct initialization `T x(1)` is left to the object layer)
    cut = re.search(r"[\[{(]", head)
    decl_head = head[:cut.start()] if cut else head
    ids = list(re.finditer(r"[A-Za-z_]\w*", decl_head))
    if len(ids) < (1 if body else 2):
        return None
    last = ids[-1]
    # the pointer stars (and a const after them: `T* const p`) belong to the declarator
    m = re.search(r"(?:[*&]\s*)+(?:const\s+)?$", decl_head[:last.start()])
    return base + (m.start() if m else last.start())


# ---------------------------------------------------------------------------------------------------- judging

_WORDS = re.compile(r"[A-Za-z_]\w*")
_PLAIN_NUMBER = re.compile(r"(?:(?:unsigned|signed)\s+)?(?:char|short|int|long(?:\s+long)?|float|double|half|__half|"
                           r"half2|__half2|__nv_bfloat16|__nv_bfloat162|bool|size_t|u?int(?:8|16|32|64)_t|"
                           r"(?:u?char|u?short|u?int|u?long|u?longlong|float|double)[1-4])")


def _immutable(specifiers: str, declarator: str) -> bool:
    words = set(_WORDS.findall(specifiers))
    if words & {"constexpr", "__constant__"}:
        return True
    dhead = re.split(r"[\[={]", declarator, maxsplit=1)[0]
    if "*" in dhead or "&" in dhead:
        # a pointer is const only when `const` follows its last star (`T* const p`)
        return bool(re.search(r"\*\s*const\b[^*]*$", dhead))
    return "const" in words


def _written(code: str, nc: str, name: str, decl_pos: int, is_array: bool) -> int | None:
    """Where the code may write `name` (a position), or None when every use reads it. `nc` keeps the string
    literals: inline PTX that names the symbol (`st.global.u32 [g_x], ...`) counts as a write."""
    if (w := _host_written(code, name)) is not None:
        return w
    named = re.compile(rf"(?<![\w.>:$%]){re.escape(name)}\b")
    for m in named.finditer(nc):
        if not named.match(code, m.start()):
            return m.start()  # inside a string literal
    for m in named.finditer(code):
        if m.start() == decl_pos:
            continue
        before = code[max(0, m.start() - 40):m.start()].rstrip()
        if re.search(r"(?<!&)&$|\+\+$|--$", before):
            return m.start()
        if re.search(r"\bsizeof\s*\($", before):
            continue
        j = m.end()
        while True:
            k = j
            while k < len(code) and code[k] in " \t\n":
                k += 1
            if k < len(code) and code[k] == "[":
                j = _match_close(code, k, "[", "]")
            elif re.match(r"\.\s*[A-Za-z_]\w*", code[k:]):
                j = k + re.match(r"\.\s*[A-Za-z_]\w*", code[k:]).end()
            else:
                break
        after = code[j:j + 4].lstrip()
        if re.match(r"(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--", after):
            return m.start()
        if is_array and j == m.end():
            return m.start()  # the array decays to a pointer: anything may write through it
    return None


def _host_written(code: str, name: str) -> int | None:
    """Where host code writes a __constant__ symbol (device code cannot): a copy to it, or its address taken."""
    for m in re.finditer(r"\b(?:cudaMemcpyToSymbol\w*|cudaGetSymbolAddress|cuModuleGetGlobal\w*)\s*\(", code):
        args = code[m.end():_match_close(code, m.end() - 1) - 1]
        if re.search(rf"(?<![\w.>:]){re.escape(name)}\b", args):
            return m.start()
    m = re.search(rf"&\s*{re.escape(name)}\b", code)
    return m.start() if m else None


def _scratch_ok(decl: _Decl) -> str | None:
    """None when the declaration qualifies as annotated scratch, else why not."""
    words = _WORDS.findall(decl.specifiers)
    if decl.scope != "namespace" or not {"__device__", "__constant__"} & set(words):
        return "the annotation is only for a namespace-scope __device__ variable"
    if "__managed__" in words:
        return "__managed__ memory is never scratch"
    if re.search(r"[*&]", decl.declarator.split("[")[0]) or re.search(r"[={(]", decl.declarator):
        return "a scratch variable holds plain numbers (no pointer) and has no initializer"
    if not _PLAIN_NUMBER.fullmatch(" ".join(w for w in words if w not in {"__device__", "__constant__", "static",
                                                                         "volatile"})):
        return "a scratch variable holds plain numbers (int, unsigned, float, half, float4, ...)"
    return None


def per_device_fingerprint(code: str, func: _Func) -> str:
    """A hash of the function's text from its `template` head, blind to whitespace and comments."""
    start = code.rfind("template", 0, func.start)
    text = re.sub(r"\s+", " ", code[start:func.end])
    text = re.sub(r" ?([^\w ]) ?", r"\1", text).strip()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _release_stream_ok(code: str, decl: _Decl, funcs: list[_Func]) -> bool:
    """The release adapter's `cl2_release::stream`, written only by `cl2_release::stream = stream;` in hgemm."""
    if decl.name != "stream" or _one_line(decl.text) != "static cudaStream_t stream = nullptr":
        return False
    ns = None
    for m in re.finditer(r"\bnamespace\s+cl2_release\s*\{", code):
        end = _match_close(code, m.end() - 1, "{", "}")
        if m.end() <= decl.pos < end:
            ns = (m.end(), end)
    if ns is None:
        return False
    write = r"\s*(?:=(?!=)|[-+*/%&|^]=|\+\+|--)"
    writes = list(re.finditer(r"\bcl2_release\s*::\s*stream" + write + r"|(?:\+\+|--|&)\s*cl2_release\s*::\s*stream\b",
                              code))
    hgemm = next((f for f in funcs if f.name == "hgemm"), None)
    if len(writes) != 1 or hgemm is None or not hgemm.start < writes[0].start() < hgemm.end:
        return False
    if not re.match(r"\bcl2_release\s*::\s*stream\s*=\s*stream\s*;", code[writes[0].start():]):
        return False
    inside = code[ns[0]:ns[1]]
    return not re.search(r"(?<![\w.>:])stream" + write + r"|&\s*stream\b", inside.replace("stream = nullptr", "", 1))


def _per_device_ok(code: str, func: _Func) -> str | None:
    """None when `func` is the project's per_device template and every call passes a plain fill function."""
    if per_device_fingerprint(code, func) != PER_DEVICE_SHA:
        return "this per_device is not the project's template (its text differs)"
    for m in re.finditer(r"(?<![\w.>:])per_device\s*\(", code):
        if func.start - 200 < m.start() < func.start:
            continue  # the definition itself
        args = [a.strip() for _, a in _split_top(code[m.end():_match_close(code, m.end() - 1) - 1])]
        if len(args) != 3 or not re.fullmatch(r"[A-Za-z_]\w*", args[2]):
            return f"line {_line_of(code, m.start())}: per_device's fill must be a named function, not {args[-1]!r}"
        if not re.search(rf"\bbool\s+{args[2]}\s*\(\s*int\b[^,()]*,\s*[\w:]+\s*&\s*\w*\s*\)", code):
            return (f"line {_line_of(code, m.start())}: per_device's fill `{args[2]}` must be a function "
                    f"`bool {args[2]}(int device, Entry&)`, which sees no operand")
    return None


_ALLOC = re.compile(r"\b(cudaMalloc(?:Async|Managed|Host|Pitch|3D|Array|FromPoolAsync)?|cudaHostAlloc|"
                    r"cuMemAlloc\w*)\s*\(")


def _alloc_target(arg: str) -> str | None:
    arg = re.sub(r"\b(?:reinterpret_cast|static_cast|const_cast)\s*<[^>]*>", "", arg)
    arg = re.sub(r"\(\s*(?:const\s+)?\w+\s*\*+\s*\)", "", arg)  # C-style casts such as (void**)
    m = re.search(r"&?\s*\(?\s*([A-Za-z_]\w*(?:\s*(?:\.|->)\s*[A-Za-z_]\w*)*)", arg)
    return re.sub(r"\s+", "", m.group(1)) if m else None


def _allocations(code: str, funcs: list[_Func], classes: list[tuple[int, int]]) -> tuple[list[str], set[str]]:
    """Reasons for allocations not freed in the same function (or, for a member, in its class: RAII), and the names
    allocations are stored into."""
    reasons, targets = [], set()
    for m in _ALLOC.finditer(code):
        close = _match_close(code, m.end() - 1)
        args = _split_top(code[m.end():close - 1])
        target = _alloc_target(args[0][1]) if args else None
        if target is None:
            continue
        targets.add(re.split(r"\.|->", target)[0])
        func = next((f for f in funcs if f.start < m.start() < f.end), None)
        if func is None:
            continue
        free = re.compile(r"\b(?:cudaFree\w*|cuMemFree\w*)\s*\(\s*(?:\(\s*\w+\s*\*+\s*\)\s*|"
                          r"(?:reinterpret_cast|static_cast)\s*<[^>]*>\s*\(\s*)?" +
                          r"\s*(?:\.|->)\s*".join(map(re.escape, re.split(r"\.|->", target))) + r"\b")
        owner = min((c for c in classes if c[0] < m.start() < c[1]), key=lambda c: c[1] - c[0], default=None)
        if not free.search(code, func.start, func.end) and not (owner and free.search(code, *owner)):
            reasons.append(f"line {_line_of(code, m.start())}: {m.group(1)}({target}) has no matching free in "
                           f"`{func.name}`: {_MEMORY_WHY}")
    return reasons, targets


# ---------------------------------------------------------------------------------------------------- text layer


@dataclass
class StateReport:
    reasons: list[str]
    allowed: set[str]                    # globals the text layer accepted (read-only, constant, annotated scratch)
    allowed_locals: set[tuple[str, str]]  # (function, name) of local statics it accepted (per_device's cache)
    refused: set[str]                    # names it already refused


def analyse(source: str, code: str, nc: str | None = None) -> StateReport:
    """`code`: the source with comments and literals blanked, `nc` with comments blanked (screen.strip_source), both
    the same length as `source`."""
    nc = code if nc is None else nc
    code = _blank_preprocessor(code)
    lines = source.splitlines()
    decls, funcs, classes = _scan(code)
    alloc_reasons, alloc_targets = _allocations(code, funcs, classes)
    reasons: list[str] = []
    allowed: set[str] = set()
    allowed_locals: set[tuple[str, str]] = set()
    refused: set[str] = set()

    def why_host(name: str) -> str:
        return _MEMORY_WHY if name in alloc_targets else _STATE_WHY

    for d in decls:
        refused.add(d.name)  # taken back below where it is accepted
        line = _line_of(code, d.pos)
        words = set(_WORDS.findall(d.specifiers))
        annotated = line - 1 < len(lines) and SCRATCH_ANNOTATION.search(lines[line - 1])
        if "thread_local" in words:
            reasons.append(f"line {line}: `{d.text}`: thread_local state outlives the call: {_NO_STATE}")
            continue
        if words & {"__shared__", "typedef"} or ("extern" in words and not re.search(r"[={(]", d.declarator)):
            continue  # per-block shared memory, or a declaration of something defined elsewhere
        if "__managed__" in words:
            reasons.append(f"line {line}: `{d.text}`: __managed__ memory persists between calls: {_NO_STATE}")
            continue
        if "__constant__" in words:
            if annotated and (bad := _scratch_ok(d)) is not None:
                reasons.append(f"line {line}: `// cudal2: scratch` on `{d.text}`: {bad}")
            elif not annotated and (w := _host_written(code, d.name)) is not None:
                reasons.append(f"line {line}: `{d.text}` (written at line {_line_of(code, w)}): a __constant__ the "
                               f"code writes persists between calls like a __device__ global: {_NO_STATE}; "
                               "per-call parameters are kernel arguments")
            else:
                allowed.add(d.name)
            continue
        if "__device__" in words:
            if _immutable(d.specifiers, d.declarator):
                allowed.add(d.name)
                continue
            if annotated:
                if (bad := _scratch_ok(d)) is None:
                    allowed.add(d.name)
                else:
                    reasons.append(f"line {line}: `// cudal2: scratch` on `{d.text}`: {bad}")
                continue
            is_array = "[" in d.declarator.split("=")[0]
            if (w := _written(code, nc, d.name, d.pos, is_array)) is not None:
                reasons.append(f"line {line}: `{d.text}` (written at line {_line_of(code, w)}): {_DEVICE_WHY}")
            else:
                allowed.add(d.name)
            continue
        if annotated:
            reasons.append(f"line {line}: `// cudal2: scratch` on `{d.text}`: it is only for a namespace-scope "
                           "__device__ variable")
            continue
        if _immutable(d.specifiers, d.declarator) or _release_stream_ok(code, d, funcs):
            allowed.add(d.name)
            continue
        what = "a static class member" if d.scope == "class" else "a namespace-scope variable"
        reasons.append(f"line {line}: `{d.text}`: {what} is {why_host(d.name)}")

    statements: set[int] = set()
    for m in re.finditer(r"\b(static|thread_local)\b", code):
        func = next((f for f in funcs if f.start < m.start() < f.end), None)
        if func is None:
            continue
        a = max(code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start()), code.rfind("}", 0, m.start())) + 1
        if a in statements:
            continue  # `static thread_local int x;`: one statement, read once
        statements.add(a)
        b = m.start()
        depth = 0
        while b < len(code):
            ch = code[b]
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
                if depth < 0:
                    break
            elif ch == ";" and depth == 0:
                break
            b += 1
        local = _declarations(code, a, b, [], "function")
        for d in local:
            line = _line_of(code, d.pos)
            words = set(_WORDS.findall(d.specifiers))
            if "thread_local" in words:
                reasons.append(f"line {line}: `{d.text}`: thread_local state outlives the call: {_NO_STATE}")
            elif "__shared__" in words or _immutable(d.specifiers, d.declarator):
                allowed_locals.add((func.name, d.name))
            elif func.name == "per_device" and (bad := _per_device_ok(code, func)) is None:
                allowed_locals.add((func.name, d.name))
            elif func.name == "per_device":
                refused.add(d.name)
                reasons.append(f"line {line}: `{d.text}`: {bad}; otherwise a function-local static is "
                               f"{why_host(d.name)}")
            elif func.device:
                refused.add(d.name)
                reasons.append(f"line {line}: `{d.text}`: a static in device code is a __device__ global: it "
                               f"persists on the GPU between calls: {_NO_STATE}")
            else:
                refused.add(d.name)
                reasons.append(f"line {line}: `{d.text}`: a function-local static is {why_host(d.name)}")
    refused -= allowed
    reasons.extend(alloc_reasons)
    reasons.sort(key=lambda r: int(re.match(r"line (\d+)", r).group(1)) if r.startswith("line ") else 0)
    return StateReport(reasons, allowed, allowed_locals, refused)


_KEYWORD_MACRO = re.compile(r"^[ \t]*#[ \t]*(define|undef)[ \t]+(static|thread_local|const|constexpr|extern|mutable|"
                            r"__device__|__constant__|__managed__|__shared__|__host__|__global__)\b", re.M)


def keyword_macro_reasons(without_comments: str) -> list[str]:
    """Redefining a storage keyword would make the text say something the compiler does not see."""
    return [f"line {_line_of(without_comments, m.start())}: #{m.group(1)} {m.group(2)}: a candidate does not "
            "redefine storage keywords" for m in _KEYWORD_MACRO.finditer(without_comments)]


# ---------------------------------------------------------------------------------------------------- object layer

# The compiler's own symbols (fatbinary registration, kernel launch stubs, EH personality) and iostream's init.
_GENERATED = re.compile(r"^(?:__fatDeviceText|__cudaFatCubinHandle|__cudaPrelinkedFatbins\w*|__nv_\w+|fatbinData|"
                        r"DW\.ref\..*|\.L.*|std::__ioinit|(?:guard variable for )?__device_stub__.*::__(?:tmp|handle)|"
                        r"(?:vtable|typeinfo|typeinfo name|VTT|construction vtable) for .*)$")
_GENERATED_MANGLED = re.compile(r"^_Z(?:GV)?Z(?:L)?\d+__device_stub__")
# Namespaces of the headers a candidate may include: their writable symbols are the toolkits', not the candidate's.
_HEADER_NAMESPACES = ("std", "cuda", "cute", "cutlass", "cub", "thrust", "nv", "cooperative_groups", "nvcuda",
                      "__gnu_cxx", "__cxxabiv1", "__cuda_ptx", "cuda_for_dali")
_WRITABLE_TYPES = set("bBdDuVvC")


def _split_scope(name: str) -> list[str]:
    parts, depth, start, j = [], 0, 0, 0
    while j < len(name):
        ch = name[j]
        if ch in "<({[":
            depth += 1
        elif ch in ">)}]":
            depth -= 1
        elif depth == 0 and name.startswith("::", j):
            parts.append(name[start:j])
            start = j + 2
            j += 1
        j += 1
    parts.append(name[start:])
    return parts


def writable_symbols(obj: Path) -> list[tuple[str, str, str]]:
    """(type, mangled, demangled) for the object's defined writable data symbols."""
    nm = shutil.which("nm")
    if nm is None:
        return []
    out = subprocess.run([nm, "--defined-only", str(obj)], capture_output=True, text=True, timeout=60).stdout
    rows = [ln.split(None, 2) for ln in out.splitlines()]
    rows = [(r[1], r[2]) for r in rows if len(r) == 3 and r[1] in _WRITABLE_TYPES]
    if not rows:
        return []
    filt = shutil.which("c++filt")
    names = [m for _, m in rows]
    if filt:
        dem = subprocess.run([filt], input="\n".join(names), capture_output=True, text=True, timeout=60).stdout
        demangled = dem.splitlines()
        if len(demangled) != len(names):
            demangled = names
    else:
        demangled = names
    return [(t, m, d) for (t, m), d in zip(rows, demangled)]


def state_symbol_reasons(obj: Path, source: str, code: str, nc: str | None = None) -> list[str]:
    """Writable symbols of the candidate's own that the text layer did not account for."""
    report = analyse(source, code, nc)
    opened = set(re.findall(r"\bnamespace\s+([A-Za-z_]\w*)", code))
    reasons: list[tuple[int, str]] = []
    seen: set[str] = set()
    for typ, mangled, name in writable_symbols(obj):
        if _GENERATED.match(name) or _GENERATED_MANGLED.match(mangled):
            continue
        name = name.removeprefix("guard variable for ")
        parts = _split_scope(name)
        top = parts[0]
        if top in _HEADER_NAMESPACES and top not in opened:
            continue
        ident = re.match(r"[A-Za-z_]\w*", parts[-1])
        ident = ident.group() if ident else parts[-1]
        local = mangled.startswith(("_ZZ", "_ZGVZ"))
        owner = re.match(r"[A-Za-z_]\w*", parts[-2]) if len(parts) > 1 else None
        if local and owner and (owner.group(), ident) in report.allowed_locals:
            continue
        if (not local and ident in report.allowed) or ident in report.refused or ident in seen:
            continue
        seen.add(ident)
        what = "a function-local static" if local else "a writable global (host variable or __device__ shadow)"
        m = re.search(rf"(?<![\w.>]){re.escape(ident)}\b", code)
        where = f"line {_line_of(code, m.start())}: " if m else ""
        spelled = "" if m else ", a name the source never spells (built by a macro)"
        reasons.append((m.start() if m else len(code), f"{where}`{ident}` ({name} in the compiled object{spelled}): "
                        f"{what} that the text does not show as such (spelled through a macro?): {_STATE_WHY}"))
    return [r for _, r in sorted(reasons)]
