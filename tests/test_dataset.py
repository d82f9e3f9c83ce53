"""`cudal2 dataset export` on runs made here by the campaign's own code: one with the real OpenAI backend against a
scripted server on 127.0.0.1, one with the built-in policy. The GPU seam replays results recorded on a GPU
(tests/golden/recorded_results.json): an LLM kernel's by its `// variant:` tag, a policy kernel's picked by its
hash (which kernel earned which recorded number does not matter to an export). Archive, transcript, finals and the
export are real; a second server replays the exported completions to a fresh campaign."""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from http_servers import RECORDED_RESULTS, Reply, ScriptedServer, kernel_source, openai_chat  # noqa: E402

from agent.campaign.archive import Archive  # noqa: E402
from agent.campaign.driver import CampaignConfig, Seam, run_campaign  # noqa: E402
from agent.campaign.config import ModelConfig  # noqa: E402
from agent.dataset import DatasetError, NothingToExport, export_dataset  # noqa: E402
from agent.dataset.formats import PAIR_MIN_GAP  # noqa: E402
from agent.dataset.privacy import has_absolute_path, scrub_paths, strings_in  # noqa: E402
from agent.dataset.prompts import ArchiveAsOf, render  # noqa: E402
from agent.dataset.runs import open_run, step_groups  # noqa: E402
from agent.dataset.splits import split_of_shapes  # noqa: E402
from agent.proposers import make_proposer  # noqa: E402
from agent.proposers.parse import parse_reply  # noqa: E402
from agent.secrets import scrub  # noqa: E402
from evaluator.record import EvalResult  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
GPU = "NVIDIA H200"
MODEL = "cuda-l2-test"
KEY_ENV = "CUDAL2_DATASET_TEST_API_KEY"
KEY = "sk-cudal2test-0123456789abcdefXYZ"
LLM_SHAPES = [(64, 64, 64), (128, 256, 512), (256, 256, 256)]
POLICY_SHAPES = [(512, 512, 512), (128, 128, 1024)]
LLM_TAGS = ["tile128", "naive", "wrong", "pipelined", "broken", "tile128x256", "wgmma", "naive"]


class RecordedSeam(Seam):
    """One GPU, one lane (the runs are deterministic), results recorded on a GPU."""
    lanes = 1

    def __init__(self):
        self.gpu_name, self.arch = GPU, "sm_90a"
        self.recorded = {k: EvalResult.from_dict(v) for k, v in json.loads(RECORDED_RESULTS.read_text()).items()}
        self.tags = sorted(self.recorded)

    def evaluate(self, source, shape, *, acc, mode, profile, rivals=None, rounds=None):
        h = hashlib.sha256(source.encode()).hexdigest()
        m = re.search(r"// variant: (\S+)", source)
        tag = m.group(1) if m else self.tags[int(h, 16) % len(self.tags)]
        return dataclasses.replace(self.recorded[tag], shape=tuple(shape), acc=acc, mode=mode, profile=profile,
                                   source_hash=h, code_length=len(source))

    def gpu_facts(self):
        return dict(self.recorded["naive"].gpu)


def _campaign(runs_dir: Path, run: str, shapes, model: ModelConfig, global_db: Path | None = None):
    from rich.console import Console

    cfg = CampaignConfig(run=run, shapes=list(shapes), budget_candidates=4, runs_dir=runs_dir, global_archive=global_db,
                         n_per_step=2, lanes=1, confirm_top=2, final_repeats=1)
    summary = run_campaign(cfg, seam=RecordedSeam(), make_proposer=lambda: make_proposer(model),
                           model_public=model.public_dict(), console=Console(file=io.StringIO()), live=False)
    assert not summary["failures"], summary["failures"]
    return cfg.run_dir


def _openai(server) -> ModelConfig:
    return ModelConfig(backend="openai", base_url=server.base_url + "/v1", model_name=MODEL, api_key_env=KEY_ENV,
                       concurrency=1, max_attempts=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """runs/llm (OpenAI backend, scripted replies; one reply leaks the key and a path of this machine into a kernel
    comment) and runs/policy (the built-in policy, with a global archive: its second shape is seeded with the
    first one's kernels)."""
    root = tmp_path_factory.mktemp("dataset")
    runs_dir = root / "runs"
    os.environ[KEY_ENV] = KEY
    try:
        def reply(i, path, body):
            extra = f"// request {i}\n"
            if i == 0:
                extra += f"// scratch copy at {root}/scratch/k.cu, endpoint key {KEY}\n"
            fenced = "```cuda\n" + kernel_source(LLM_TAGS[i % len(LLM_TAGS)], extra=extra) + "```"
            return Reply(200, openai_chat("A larger tile should help.\n" + fenced, model=MODEL))

        with ScriptedServer(reply) as server:
            _campaign(runs_dir, "llm", LLM_SHAPES, _openai(server))
            assert server.failures == []
    finally:
        os.environ.pop(KEY_ENV, None)
    _campaign(runs_dir, "policy", POLICY_SHAPES, ModelConfig(backend="builtin"), global_db=root / "global.sqlite")
    return root


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _split(root: Path, name: str, split: str) -> list[dict]:
    """A split's records, with their metadata where it lies beside them (chat)."""
    recs = _read(root / "out" / f"{name}.{split}.jsonl")
    meta = root / "out" / f"{name}.{split}.meta.jsonl"
    if meta.exists():
        assert all(set(r) == {"messages"} for r in recs)  # what an OpenAI fine-tuning upload accepts
        recs = [{**r, **m} for r, m in zip(recs, _read(meta), strict=True)]
    return recs


def _export(root: Path, name: str, runs=("llm", "policy"), **kw) -> tuple[dict, list[dict]]:
    m = export_dataset(list(runs), root / "out" / f"{name}.jsonl", runs_dir=root / "runs", **kw)
    return m, _split(root, name, "train") + _split(root, name, "validation")


@pytest.fixture(scope="module")
def exports(runs):
    return {fmt: _export(runs, fmt, fmt=fmt) for fmt in ("preference", "reward")}


def _variant(root: Path, rec: dict, vid: int | None = None):
    return Archive(root / "runs" / rec["run"] / "archive.sqlite").get(vid if vid is not None else rec["variant_id"])


def _exported_source(src: str) -> str:
    return scrub_paths(scrub(src)).strip("\n") + "\n"


def test_cli_chat_export_every_correct_kernel_with_its_step_prompt(runs):
    out = runs / "out" / "sft.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO), KEY_ENV: KEY}
    r = subprocess.run([sys.executable, "-m", "agent.cli", "dataset", "export", "llm", str(runs / "runs" / "policy"),
                        "--runs-dir", str(runs / "runs"), "--out", str(out)], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "chat record(s) from 2 run(s)" in r.stdout and "left out" in r.stdout and "sft.train.meta.jsonl" in r.stdout
    train, val = _split(runs, "sft", "train"), _split(runs, "sft", "validation")
    recs = train + val
    # every correct kernel of both runs, once; only correct ones
    ok = set()
    for run in ("llm", "policy"):
        a = Archive(runs / "runs" / run / "archive.sqlite")
        for key in a.shapes():
            ok |= {(run, v.id) for v in a.history(key.gpu, key.acc, key.shape) if v.status == "ok"}
    assert sorted((r["run"], r["variant_id"]) for r in recs) == sorted(ok)
    assert {r["proposer"] for r in recs} == {"builtin", "seed:global-archive", MODEL}
    for rec in recs:
        assert [m["role"] for m in rec["messages"]] == ["system", "user", "assistant"]
        v = _variant(runs, rec)
        assert v.status == "ok" and rec["speedup"] == pytest.approx(v.speedup)
        # the reply goes through the loop's own parser and gives back the archived kernel
        parsed = parse_reply(rec["messages"][2]["content"], None)
        assert parsed.ok and parsed.source == _exported_source(v.read_source())
        user = rec["messages"][1]["content"]
        m, n, k = rec["shape"]
        assert f"M={m}, N={n}, K={k}" in user and f"This is step {rec['step'] or 0};" in user
        # seeds (no step) come before step 0; a step's prompt shows the seeds and every earlier step
        earlier = [x for x in Archive(runs / "runs" / rec["run"] / "archive.sqlite").history(GPU, "fp32", (m, n, k))
                   if rec["step"] is not None and (x.step is None or x.step < rec["step"])]
        assert f"{len(earlier)} variant(s) of this shape have been evaluated so far" in user
        assert "- SMs: 132" in user  # the GPU facts the loop's prompt had
    llm = [r for r in recs if r["run"] == "llm"]
    events = [json.loads(line) for line in (runs / "runs" / "llm" / "transcript.jsonl").open()]
    sent = {(tuple(e["shape"]), e["step"]): e["input"]["prompt"] for e in events if e["node"] == "propose"}
    for rec in llm:  # the LLM's records carry the prompt it was sent
        assert rec["prompt_from"] == "transcript"
        prompt = sent[(tuple(rec["shape"]), rec["step"])]
        assert [m["content"] for m in rec["messages"][:2]] == [scrub_paths(prompt["system"]),
                                                                scrub_paths(prompt["user"])]
    assert {r["prompt_from"] for r in recs if r["run"] == "policy"} == {"rendered"}
    # the kernel that quoted the key and a path of this machine is exported without either
    leaked = [r for r in llm if "scratch copy at" in r["messages"][2]["content"]]
    assert leaked and all("<path>/k.cu" in r["messages"][2]["content"] and "[REDACTED]" in r["messages"][2]["content"]
                          for r in leaked)
    # split by shape, none in both; the manifest counts and hashes what was written
    assert not {tuple(r["shape"]) for r in train} & {tuple(r["shape"]) for r in val} and train and val
    man = json.loads((runs / "out" / "sft.manifest.json").read_text())
    assert man["counts"]["by_split"] == {"train": len(train), "validation": len(val)}
    for split in ("train", "validation"):
        f = man["files"][split]
        assert f["sha256"] == hashlib.sha256((runs / "out" / f["file"]).read_bytes()).hexdigest()
        assert f["meta_sha256"] == hashlib.sha256((runs / "out" / f["meta_file"]).read_bytes()).hexdigest()
    assert [x["name"] for x in man["runs"]] == ["llm", "policy"] and man["trainer_columns"] == ["messages"]
    assert man["counts"]["skipped"]["refused by the evaluator"] > 0
    assert sorted(man["shapes"]["train"] + man["shapes"]["validation"]) == sorted(
        {"x".join(map(str, r["shape"])) for r in recs})


def test_rendered_prompts_are_the_ones_the_loop_sent(runs):
    """The prompt a step is given when its proposer sent none (the built-in policy) is made by the loop's code from
    the archive as it was then: for every LLM step, rendering it that way gives exactly what the model was sent."""
    run = open_run(runs / "runs" / "llm")
    asof = ArchiveAsOf(run.archive)
    try:
        steps = [g for g in step_groups(run) if g.logged_prompt]
        assert len(steps) >= 6
        for g in steps:
            system, user, how = render(dataclasses.replace(g, logged_prompt=None), asof)
            assert how == "rendered"
            assert (scrub(system), scrub(user)) == (g.logged_prompt["system"], g.logged_prompt["user"]), g.step
    finally:
        asof.close()


def test_preference_pairs_share_a_prompt_and_differ_measurably(runs, exports):
    man, recs = exports["preference"]
    assert recs and man["trainer_columns"] == ["prompt", "chosen", "rejected"]
    refused = slower = 0
    for rec in recs:
        assert [m["role"] for m in rec["prompt"]] == ["system", "user"]
        assert rec["chosen"][0]["role"] == rec["rejected"][0]["role"] == "assistant"
        a = _variant(runs, rec, rec["chosen_kernel"]["variant_id"])
        b = _variant(runs, rec, rec["rejected_kernel"]["variant_id"])
        assert (a.shape, a.step) == (b.shape, b.step) == (tuple(rec["shape"]), rec["step"])
        assert a.status == "ok"
        if b.status == "ok":
            slower += 1
            assert a.speedup >= b.speedup * (1 + PAIR_MIN_GAP)
        else:
            refused += 1
            assert rec["rejected_kernel"]["reason"] == b.reason and b.reason
        for side, v in (("chosen", a), ("rejected", b)):
            assert parse_reply(rec[side][0]["content"], None).source == _exported_source(v.read_source())
    assert refused and slower
    assert {r["chosen_kernel"]["proposer"] for r in recs} >= {"builtin", MODEL}


def test_reward_records_hold_every_kernel_with_its_measurements(runs, exports):
    from agent.campaign.archive_io import BASELINE_NAMES
    from evaluator.contract import MODES

    man, recs = exports["reward"]
    total = 0
    for run in ("llm", "policy"):
        a = Archive(runs / "runs" / run / "archive.sqlite")
        total += sum(len(a.history(k.gpu, k.acc, k.shape)) for k in a.shapes())
    assert len(recs) == total == man["counts"]["records"]
    assert set(man["counts"]["by_status"]) >= {"ok", "incorrect", "compile_error"}
    winners = 0
    for rec in recs:
        v = _variant(runs, rec)
        assert set(rec["speedups"]) == set(BASELINE_NAMES) and set(rec["speedups_by_mode"]) == set(MODES)
        assert rec["correct"] == (v.status == "ok") and rec["status"] == v.status and rec["reason"] == v.reason
        assert [c["name"] for c in rec["checks"]] == [c.name for c in v.result.checks]
        if v.status == "ok":
            assert rec["speedups"]["cublaslt-autotune-max"] == pytest.approx(v.speedup)
            assert rec["speedups_by_mode"]["offline"] == rec["speedups"]
            winners += rec["speedups_by_mode"]["server"] is not None  # measured again at the end in server mode
        else:
            assert rec["reward"] == -1.0 and rec["reason"] and not any(rec["speedups"].values())
    assert winners == len(LLM_SHAPES) + len(POLICY_SHAPES)


def test_a_server_replaying_the_exported_completions_drives_a_campaign_to_the_same_kernels(runs, exports):
    """The exported prompts are byte for byte what a campaign sends, and the completions are replies the loop takes:
    a server that answers each prompt with its exported completions makes a fresh campaign propose exactly them."""
    _, recs = exports["reward"]
    answers: dict[tuple[str, str], list[str]] = {}
    for rec in sorted((r for r in recs if r["run"] == "llm"), key=lambda r: r["variant_id"]):
        answers.setdefault((rec["prompt"][0]["content"], rec["prompt"][1]["content"]), []).append(
            rec["completion"][0]["content"])
    served = []

    def replay(i, path, body):
        msgs = {m["role"]: m["content"] for m in body["messages"]}
        queue = answers.get((msgs["system"], msgs["user"]))
        if not queue:
            server.fail(f"request {i}: a prompt the export does not hold")
            return Reply(200, openai_chat("no kernel", model=MODEL))
        served.append(queue[0])
        return Reply(200, openai_chat(queue.pop(0), model=MODEL))

    with ScriptedServer(replay) as server:
        replayed = _campaign(runs / "runs", "replayed", LLM_SHAPES, _openai(server))
    assert server.failures == [] and all(not q for q in answers.values())
    original, again = Archive(runs / "runs" / "llm" / "archive.sqlite"), Archive(replayed / "archive.sqlite")
    for shape in LLM_SHAPES:
        a, b = original.history(GPU, "fp32", shape), again.history(GPU, "fp32", shape)
        assert [(v.step, v.status, v.speedup) for v in a] == [(v.step, v.status, v.speedup) for v in b]
        assert [_exported_source(v.read_source()) for v in a] == [v.read_source() for v in b]
    assert sorted(parse_reply(c, None).source for c in served) == sorted(
        v.read_source() for s in LLM_SHAPES for v in again.history(GPU, "fp32", s))
    # --dedupe keeps one record per kernel and shape: the replayed run adds none
    man, recs = _export(runs, "deduped", runs=("llm", "replayed"), fmt="reward", dedupe=True)
    assert {r["run"] for r in recs} == {"llm"} and man["counts"]["skipped"]["duplicate (--dedupe)"] == len(recs)


def test_no_record_holds_a_key_or_a_path_of_this_machine(runs, exports):
    _export(runs, "private", fmt="chat")
    files = sorted((runs / "out").glob("*.json*"))
    assert len(files) >= 9
    for f in files:
        text = f.read_text()
        for secret in (KEY, str(runs), str(REPO), str(Path.home()), "/tmp/"):
            assert secret not in text, (f.name, secret)
        for rec in (_read(f) if f.suffix == ".jsonl" else [json.loads(text)]):
            for s in strings_in(rec):
                assert not has_absolute_path(s), (f.name, s[:200])


def test_records_load_with_datasets_and_have_the_trainers_columns(runs, exports):
    datasets = pytest.importorskip("datasets")
    _export(runs, "load_chat", fmt="chat", min_speedup=0.5)
    for name, columns in (("load_chat", ["messages"]), ("preference", ["prompt", "chosen", "rejected"]),
                          ("reward", ["prompt", "completion"])):
        files = {s: str(runs / "out" / f"{name}.{s}.jsonl") for s in ("train", "validation")}
        ds = datasets.load_dataset("json", data_files=files)
        assert set(ds) == {"train", "validation"} and len(ds["train"]) and len(ds["validation"])
        for split in ds.values():
            assert set(columns) <= set(split.column_names)
            for col in columns:
                assert all(m["role"] in ("system", "user", "assistant") for row in split[col] for m in row)
    trl = pytest.importorskip("trl.data_utils")
    chat = datasets.load_dataset("json", data_files=str(runs / "out" / "load_chat.train.jsonl"))["train"]
    pref = datasets.load_dataset("json", data_files=str(runs / "out" / "preference.train.jsonl"))["train"]
    assert trl.is_conversational(chat[0]) and trl.is_conversational(pref[0])


def test_filters_and_bad_input(runs):
    m_all, all_recs = _export(runs, "f_all", fmt="chat")
    m_min, min_recs = _export(runs, "f_min", fmt="chat", min_speedup=1.0)
    assert 0 < len(min_recs) < len(all_recs) and all(r["speedup"] >= 1.0 for r in min_recs)
    assert m_min["counts"]["skipped"]["below --min-speedup"] == len(all_recs) - len(min_recs)
    with pytest.raises(NothingToExport, match="accumulator is not fp16"):
        _export(runs, "f_fp16", fmt="chat", acc="fp16")
    assert not list((runs / "out").glob("f_fp16*"))
    with pytest.raises(DatasetError, match="no run 'nope'"):
        _export(runs, "f_bad", runs=("nope",))
    with pytest.raises(DatasetError, match="exist"):
        _export(runs, "f_all", fmt="chat")
    assert _split(runs, "f_all", "train")  # the earlier export is untouched
    with pytest.raises(DatasetError, match="NAME.jsonl"):
        export_dataset(["llm"], runs / "out" / "x.json", runs_dir=runs / "runs")
    with pytest.raises(DatasetError, match="min-speedup"):
        export_dataset(["llm"], runs / "out" / "x.jsonl", runs_dir=runs / "runs", min_speedup=0)


def test_a_shape_keeps_its_split_as_shapes_are_added():
    few = [(64, 64, 64), (128, 128, 128), (4096, 4096, 4096)]
    many = few + [(m, n, k) for m in (256, 1024) for n in (512, 2048) for k in (128, 8192)] * 1 + \
        [(m, 96, 64) for m in range(64, 64 * 40, 64)]
    s_few, s_many = split_of_shapes(few), split_of_shapes(many)
    assert set(s_few.values()) == {"train", "validation"}  # two or more shapes: both splits hold one
    assert 0 < sum(v == "validation" for v in s_many.values()) < len(s_many) / 4
    moved = [s for s in few if s_few[s] != s_many[s]]
    assert len(moved) <= 1  # only the shape the few-shape rule moved over can change
    assert split_of_shapes([(64, 64, 64)]) == {(64, 64, 64): "train"}


def test_a_run_with_only_its_archive_is_exported_with_rendered_prompts(runs):
    """An archive without transcript or campaign.json (say one `cudal2 archive import` filled): every prompt is
    rendered, without GPU facts, and the manifest says so; the run is named by its folder."""
    import shutil

    shutil.copytree(runs / "runs" / "policy", runs / "bare", ignore=shutil.ignore_patterns("transcript.jsonl",
                                                                                          "campaign.json"))
    man = export_dataset([str(runs / "bare")], runs / "out" / "bare.jsonl", fmt="reward")
    recs = _split(runs, "bare", "train") + _split(runs, "bare", "validation")
    [doc] = man["runs"]
    assert doc["name"] == "bare" and doc["transcript"] is False and doc["prompts_without_gpu_facts"] > 0
    assert recs and {r["prompt_from"] for r in recs} == {"rendered"} and {r["run"] for r in recs} == {"bare"}
    assert all("(no device facts available)" in r["prompt"][1]["content"] for r in recs)
