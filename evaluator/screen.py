"""Screening: refuse a candidate source, with reasons, before it is compiled or run.

Two layers. `screen(source)` reads the text (comments and string literals blanked out first, so a comment that
mentions cudaDeviceSynchronize is not a refusal): includes against an allow-list, forbidden API names, cross-call
state (evaluator/screen_state.py), the contract symbol, the size limit. `screen_symbols(object_file, source)` runs
after `nvcc -c` and reads the object's symbols, which is what the code really is after the preprocessor: a
forbidden function whose name was built with a macro, or declared by hand without its header, shows up among the
undefined ones, and a `static` spelled by a macro among the writable data.

Neither layer is a sandbox. What they miss, the run-time checks catch (a kernel that leaves work on another stream
fails the end-event check, one that corrupts memory fails the guard bands or crashes its worker). Screening exists
to turn the common and the obvious into a clear reason at no GPU cost.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from evaluator import contract
from evaluator.screen_state import analyse, keyword_macro_reasons, state_symbol_reasons

# ---------------------------------------------------------------------------------------------------- stripping


def strip_source(source: str) -> tuple[str, str]:
    """Return (without_comments, code): both the same length as `source`, newlines kept, so offsets and line
    numbers agree. `without_comments` keeps string literals (needed for `extern "C"` and #include "x");
    `code` also blanks the inside of string and character literals."""
    n = len(source)
    nc = list(source)
    code = list(source)
    i = 0

    def blank(lst: list[str], a: int, b: int) -> None:
        for j in range(a, b):
            if lst[j] != "\n":
                lst[j] = " "

    while i < n:
        c = source[i]
        nxt = source[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = i + 2
            while j < n and source[j] != "\n":
                if source[j] == "\\" and j + 1 < n and source[j + 1] == "\n":
                    j += 2  # a backslash-newline continues a // comment
                    continue
                j += 1
            blank(nc, i, j)
            blank(code, i, j)
            i = j
        elif c == "/" and nxt == "*":
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            blank(nc, i, j)
            blank(code, i, j)
            i = j
        elif c == '"':
            raw = re.search(r'(?:\bu8|\bu|\bU|\bL)?R$', source[max(0, i - 3):i])
            if raw:
                m = re.match(r'"([^()\\\s]{0,16})\(', source[i:])
                if m:
                    end = source.find(")" + m.group(1) + '"', i + m.end())
                    j = n if end < 0 else end + len(m.group(1)) + 2
                    blank(code, i + 1, j - 1)
                    i = j
                    continue
            j = i + 1
            while j < n and source[j] != '"' and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            blank(code, i + 1, j - 1)
            i = j
        elif c == "'" and not (i > 0 and (source[i - 1].isalnum() or source[i - 1] == "_")):
            # a character literal (not a digit separator as in 1'000)
            j = i + 1
            while j < n and source[j] != "'" and source[j] != "\n":
                j += 2 if source[j] == "\\" else 1
            j = min(j + 1, n)
            blank(code, i + 1, j - 1)
            i = j
        else:
            i += 1
    return "".join(nc), "".join(code)


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# ---------------------------------------------------------------------------------------------------- includes

_STD_HEADERS = frozenset("""
algorithm any array bit bitset cassert cerrno cfloat cinttypes climits cmath complex cstdarg cstdbool cstddef
cstdint cstdio cstdlib cstring ctime exception functional initializer_list iterator limits map memory new numeric
optional random ratio set stdexcept string string_view tuple type_traits typeinfo unordered_map unordered_set
utility variant vector assert.h float.h inttypes.h limits.h math.h stdarg.h stdbool.h stddef.h stdint.h stdio.h
stdlib.h string.h
""".split())

_CUDA_HEADERS = frozenset("""
cuda.h cuda_runtime.h cuda_runtime_api.h cuda_fp16.h cuda_fp16.hpp cuda_bf16.h cuda_bf16.hpp cuda_fp8.h
cuda_fp8.hpp cuda_fp6.h cuda_fp6.hpp cuda_fp4.h cuda_fp4.hpp cuda_pipeline.h cuda_pipeline_helpers.h
cuda_pipeline_primitives.h cuda_awbarrier.h cuda_awbarrier_helpers.h cuda_awbarrier_primitives.h
cuda_device_runtime_api.h cuda_occupancy.h cuda_stdint.h cudaTypedefs.h mma.h cooperative_groups.h
device_functions.h device_launch_parameters.h device_types.h driver_types.h vector_types.h vector_functions.h
vector_functions.hpp builtin_types.h host_defines.h math_constants.h math_functions.h library_types.h
device_atomic_functions.h common_functions.h channel_descriptor.h texture_types.h surface_types.h
""".split())

_CUDA_DIRS = ("cuda/", "crt/", "cooperative_groups/", "nv/", "cub/", "cutlass/", "cute/")

_THREAD_HEADERS = frozenset("thread future mutex shared_mutex condition_variable semaphore latch barrier stop_token "
                            "execution omp.h pthread.h threads.h".split())
# Console streams are allowed (debug prints are common and harmless: the worker keeps its protocol off fd 0/1 for
# output, and reading input is refused by name below); file streams, signals and non-local jumps are not.
_STD_HEADERS = _STD_HEADERS | frozenset("iostream ostream istream sstream iomanip iosfwd".split())
_IO_HEADERS = frozenset("fstream filesystem syncstream csignal signal.h csetjmp setjmp.h".split())
_NVIDIA_LIBS = re.compile(r"^(cublas|cublasLt|cudnn|cufft|curand|cusparse|cusolver|nccl|nvrtc|nvml|cupti|nvtx|"
                          r"nvjpeg|npp|thrust/|nvtx3/|cuda_profiler_api|cudaProfiler|cudaGL|cudaEGL|cudaVDPAU|"
                          r"cuda_gl_interop|cuda_egl_interop|cuda_vdpau_interop)")


def _include_reason(name: str, quoted: bool) -> str | None:
    if name.startswith("/") or ".." in name.split("/"):
        return f"#include of a file outside the toolkits ({name!r}): a candidate is one self-contained .cu file"
    if name in _STD_HEADERS or name in _CUDA_HEADERS or name.startswith(_CUDA_DIRS):
        return None
    if re.fullmatch(r"sm_\d+_(intrinsics|atomic_functions)\.hp?p?", name):
        return None
    if name in _THREAD_HEADERS:
        return f"#include <{name}>: a candidate must not create threads"
    if name in _IO_HEADERS:
        return f"#include <{name}>: file/stream I/O and signal handling are not allowed in a candidate"
    if _NVIDIA_LIBS.match(name):
        return (f"#include <{name}>: only CUDA's runtime and device headers, CUTLASS/CuTe and the C++ standard "
                "library may be used (no cuBLAS, Thrust or other NVIDIA libraries)")
    if quoted:
        return (f'#include "{name}": a candidate is one self-contained .cu file; it cannot include other files')
    return (f"#include <{name}> is not on the allow-list (CUDA runtime/device headers, CUTLASS/CuTe, "
            "the C++ standard library)")


# ---------------------------------------------------------------------------------------------------- API names

_STREAM_MSG = "a candidate launches only on the `stream` it is given and creates no streams, events or graphs"
_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\bcu(?:da)?Stream(?:Create\w*|Destroy\w*|BeginCapture\w*|EndCapture|AddCallback|AttachMemAsync|"
                r"WaitEvent\w*|SetAttribute|CopyAttributes)\b"), _STREAM_MSG),
    # Function names only: a type such as cudaEvent_t on its own does nothing.
    (re.compile(r"\bcu(?:da)?(?:Event(?:Create|Record|Synchronize|Query|Destroy|ElapsedTime)\w*|Graph[A-Z]\w*|LaunchHostFunc|UserObject[A-Z]\w*)\b(?<!_t)"),
     _STREAM_MSG),
    (re.compile(r"\b(?:cudaStreamPerThread|cudaStreamLegacy|CU_STREAM_PER_THREAD|CU_STREAM_LEGACY)\b"),
     "names a stream other than the `stream` argument; all work must go on `stream`"),
    (re.compile(r"\bcu(?:da)?(?:DeviceSynchronize|ThreadSynchronize|StreamSynchronize|StreamQuery|CtxSynchronize)\b"),
     "synchronizes the host with the device; a candidate only enqueues work on `stream` and returns"),
    (re.compile(r"\bcu(?:da)?(?:DeviceReset|SetDevice\w*|InitDevice|ThreadExit|DeviceSetLimit|ThreadSetLimit|"
                r"DeviceSetCacheConfig|DeviceSetSharedMemConfig|DeviceSetMemPool|MemPool\w+|Ctx\w+|"
                r"DevicePrimaryCtx\w+|Ipc\w+|ProfilerStart|ProfilerStop|DeviceEnablePeerAccess|Init)\b"),
     "changes device or context state shared with the evaluator (device reset/selection, limits, contexts, pools)"),
    (re.compile(r"\bcudaMem(?:cpy|set)(?:2D|3D|Peer|ToSymbol|FromSymbol|ToArray|FromArray)?\b"),
     "a synchronous memcpy/memset runs on the legacy default stream, outside `stream`: use the *Async variant "
     "with `stream`"),
    (re.compile(r"\b(?:cudaGetDriverEntryPoint\w*|cuGetProcAddress\w*|dlopen|dlsym|dlvsym|dlmopen)\b"),
     "looks up functions at run time (driver entry points, dlopen/dlsym)"),
    (re.compile(r"\bstd\s*::\s*(?:thread|jthread|async)\b|\bpthread_\w+|\bomp_\w+|(?<![.\w>])\b(?:v?fork)\s*\("),
     "a candidate must not create threads or processes"),
    (re.compile(r"\b(?:fopen\w*|freopen|fdopen|popen|getenv|secure_getenv|setenv|putenv|unsetenv|syscall|"
                r"execv\w*|execl\w*|posix_spawn\w*|mmap\w*|mprotect|ofstream|ifstream|fstream|filesystem)\b|"
                r"(?<![.\w>])\bsystem\s*\("),
     "file, environment or process access (fopen, getenv, system, popen, ...) is not allowed in a candidate"),
    (re.compile(r"\b(?:std\s*::\s*cin|stdin|scanf|fscanf|vscanf|getchar|fgets|gets|fread|getline)\b"),
     "reads the process's input (the evaluator's worker talks to its parent through stdin)"),
    # Plain names only where no kernel would call a helper of its own that way (a split-K `signal()` is fine).
    (re.compile(r"(?<![.\w>])\b(?:exit|_exit|_Exit|quick_exit|abort|atexit|at_quick_exit|sigaction|setjmp|"
                r"longjmp)\s*\(|\bstd\s*::\s*(?:terminate|raise|signal|exit|abort|quick_exit)\b"),
     "exits or signals the host process; return a non-zero status from hgemm instead"),
]

_PRAGMA_OMP = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b", re.M)
_HOST_SYSCALL_ASM = re.compile(r"\b_*asm_*\b.{0,400}?(?:syscall|sysenter|int\s+\$0x80)\b", re.S)
_INCLUDE = re.compile(r"^[ \t]*#[ \t]*(include|include_next|import)\b[ \t]*(.*)$", re.M)


def _hgemm_reasons(nc: str, code: str) -> list[str]:
    """The contract symbol: an `extern "C" int hgemm(...)` definition with eight parameters."""
    defs, c_declared = [], False
    for m in re.finditer(r"\bhgemm\s*\(", code):
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        rest = code[j:j + 200].lstrip()
        if rest.startswith("{") or re.match(r"(?:noexcept|throw\s*\(\s*\))\s*\{", rest):
            defs.append((m.start(), code[m.end():j - 1]))
        elif rest.startswith(";") and _extern_c_at(nc, code, m.start()):
            c_declared = True  # a definition after an extern "C" declaration has C linkage too
    if not defs:
        return [f"no definition of the contract function: {contract.SIGNATURE}"]
    reasons = []
    for start, params in defs:
        if not (c_declared or _extern_c_at(nc, code, start)):
            reasons.append('hgemm is defined without extern "C" linkage (the evaluator loads the unmangled symbol '
                           f"`{contract.SYMBOL}`): {contract.SIGNATURE}")
        if not re.search(r"\b(?:int|int32_t|std::int32_t)\s*$", code[max(0, start - 40):start]):
            reasons.append(f"hgemm must return int (0 = done, non-zero = shape not supported): {contract.SIGNATURE}")
        depth, commas = 0, 0
        for ch in params:
            depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
            commas += ch == "," and depth == 0
        if commas != 7:
            reasons.append(f"hgemm must take 8 parameters (A, B, B_col_major, C, M, N, K, stream), it takes "
                           f"{commas + 1 if params.strip() else 0}: {contract.SIGNATURE}")
    return reasons


def _extern_c_at(nc: str, code: str, pos: int) -> bool:
    # Directly in the declaration: `extern "C" [attributes] int hgemm(` since the last ; { or }.
    stop = max(code.rfind(";", 0, pos), code.rfind("{", 0, pos), code.rfind("}", 0, pos))
    if re.search(r'\bextern\s*"C"', nc[stop + 1:pos]):
        return True
    # Or inside an `extern "C" { ... }` block.
    stack: list[bool] = []
    for m in re.finditer(r"[{}]", code[:pos]):
        if m.group() == "{":
            stack.append(bool(re.search(r'\bextern\s*"C"\s*$', nc[max(0, m.start() - 40):m.start()])))
        elif stack:
            stack.pop()
    return any(stack)


def screen(source: str) -> list[str]:
    """Reasons to refuse `source` (empty: accepted)."""
    size = len(source.encode("utf-8", errors="replace"))
    if size > contract.MAX_SOURCE_BYTES:
        return [f"source is {size} bytes, over the limit of {contract.MAX_SOURCE_BYTES} bytes"]
    if "\x00" in source:
        return ["source contains NUL bytes; a candidate is a text .cu file"]
    nc, code = strip_source(source)
    reasons: list[str] = []
    for m in _INCLUDE.finditer(nc):
        arg = m.group(2).strip()
        line = _line_of(nc, m.start())
        inc = re.match(r'<([^>]+)>|"([^"]+)"', arg)
        if m.group(1) != "include":
            reasons.append(f"line {line}: #{m.group(1)} is not allowed; use #include")
        elif not inc:
            reasons.append(f"line {line}: computed #include ({arg[:60]!r}); name the header literally")
        elif r := _include_reason((inc.group(1) or inc.group(2)).strip(), quoted=inc.group(2) is not None):
            reasons.append(f"line {line}: {r}")
    if _PRAGMA_OMP.search(nc):
        reasons.append(f"line {_line_of(nc, _PRAGMA_OMP.search(nc).start())}: #pragma omp: a candidate must not "
                       "create threads")
    if m := _HOST_SYSCALL_ASM.search(nc):
        reasons.append(f"line {_line_of(nc, m.start())}: inline assembly making a system call")
    found: dict[str, tuple[int, str]] = {}
    for pattern, why in _RULES:
        for m in pattern.finditer(code):
            name = re.sub(r"\s+", "", m.group()).rstrip("(")
            found.setdefault(name, (_line_of(code, m.start()), why))
    for name, (line, why) in sorted(found.items(), key=lambda kv: kv[1][0]):
        reasons.append(f"line {line}: {name}: {why}")
    reasons.extend(keyword_macro_reasons(nc))
    reasons.extend(analyse(source, code, nc).reasons)
    reasons.extend(_hgemm_reasons(nc, code))
    return reasons


# ---------------------------------------------------------------------------------------------------- symbols

# Undefined symbols an object may not import, whatever spelled them. Kept narrower than the text rules because
# CUTLASS/CuTe header code also lands in the object (it may call exit/abort on a host error path, for instance).
_SYMBOL_DENY = re.compile(
    r"^(?:cu(?:da)?Stream(?:Create|Destroy|BeginCapture|EndCapture|AddCallback|Synchronize|WaitEvent|Query)\w*"
    r"|cu(?:da)?(?:Event|Graph|Ctx|DevicePrimaryCtx|Ipc)\w*|cu(?:da)?LaunchHostFunc\w*"
    r"|cu(?:da)?(?:DeviceSynchronize|DeviceReset|SetDevice|SetDeviceFlags|ThreadSynchronize|ThreadExit|"
    r"DeviceSetLimit|DeviceSetCacheConfig|DeviceSetSharedMemConfig|ProfilerStart|ProfilerStop)"
    r"|cudaMem(?:cpy|set)(?:2D|3D|Peer|ToSymbol|FromSymbol)?|cuGetProcAddress\w*"
    r"|pthread_create|pthread_detach|fork|vfork|clone|execve?|execvp|execl|execlp|execle|posix_spawnp?|system|popen"
    r"|fopen(?:64)?|freopen(?:64)?|open(?:64)?|openat(?:64)?|creat(?:64)?|getenv|secure_getenv|setenv|putenv"
    r"|dlopen|dlsym|dlvsym|dlmopen|syscall|mmap(?:64)?|mprotect|socket|connect|kill|sigaction|signal"
    # Raw descriptor I/O could reach the worker's protocol pipes (reading requests, forging results).
    r"|read|readv|pread(?:64)?|write|writev|pwrite(?:64)?|dup|dup2|dup3|send|sendmsg|sendto|stdin"
    r"|(?:__isoc99_)?v?f?scanf|getchar|fgets|gets|fread|getline|std::cin"
    r"|std::thread::\w+.*|std::__future_base.*|std::filesystem::.*|std::basic_filebuf.*)$")


def _nm(args: list[str], obj: Path) -> list[str]:
    tool = shutil.which("nm")
    if tool is None:
        return []
    out = subprocess.run([tool, *args, str(obj)], capture_output=True, text=True, timeout=60).stdout
    return out.splitlines()


def screen_symbols(obj: Path, source: str | None = None) -> list[str]:
    """Reasons to refuse a compiled object: forbidden imports, no exported `hgemm`, or (given the source it was
    built from) writable state of the candidate's own that the text screen did not see."""
    if shutil.which("nm") is None:
        return []  # binutils absent: the text screen and the run-time checks still apply
    reasons = []
    if source is not None:
        nc, code = strip_source(source)
        reasons.extend(state_symbol_reasons(obj, source, code, nc))
    undefined = [ln.strip()[2:] for ln in _nm(["-u", "-C"], obj) if ln.strip()[:2] in ("U ", "w ", "v ")]
    # Demangled C++ names keep their argument list: match on the qualified name before it.
    bad = sorted({s for s in undefined if _SYMBOL_DENY.match(s.split("(")[0])})
    if bad:
        reasons.append("the compiled code calls functions a candidate may not use: " + ", ".join(bad[:12]))
    defined = _nm(["--defined-only", "-g"], obj)
    if not any(ln.split()[-2:] == ["T", contract.SYMBOL] for ln in defined if len(ln.split()) >= 2):
        reasons.append(f'the object exports no extern "C" `{contract.SYMBOL}` function: {contract.SIGNATURE}')
    return reasons
