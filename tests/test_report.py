"""The campaign report: numbers, self-containment, and what headless Chromium actually renders."""
from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from agent.report import ReportError, ShapeRow, render, report_run, summarise, write_report
from evaluator.record import CheckOutcome, EvalResult, Timing

BASELINES = ["torch", "cublas-NN", "cublas-TN", "cublaslt-heuristic-NN", "cublaslt-heuristic-TN",
             "cublaslt-autotune-NN", "cublaslt-autotune-TN"]


def result(shape, kernel_us, baseline_us: dict[str, float], mode="offline") -> EvalResult:
    """A record as the evaluator writes it: speedup = baseline time / kernel time."""
    bl = {n: Timing(n, t, t, t * 0.98, 40, speedup_mean=t / kernel_us, speedup_median=t / kernel_us)
          for n, t in baseline_us.items()}
    return EvalResult(status="ok", shape=shape, mode=mode, candidate=Timing("candidate", kernel_us, kernel_us,
                                                                             kernel_us * 0.98, 40),
                      baselines=bl, checks=[CheckOutcome("baseline_bounded_deviation", True,
                                                         metrics={"max_abs_diff": 0.00098})])


def rows_fixture(tmp_path: Path) -> list[ShapeRow]:
    rows = []
    shapes = [(64, 64, 64), (128, 256, 512), (1024, 1024, 2048), (4096, 4096, 4096)]
    for mode, slow in (("offline", 1.0), ("server", 1.15)):
        for i, s in enumerate(shapes):
            base = 2.0 + i * 10
            times = {n: base * slow * (0.9 + 0.05 * j) for j, n in enumerate(BASELINES)}
            cu = tmp_path / "run" / "kernels" / f"{'_'.join(map(str, s))}.cu"
            cu.parent.mkdir(parents=True, exist_ok=True)
            cu.write_text('extern "C" int hgemm(...);\n')
            rows.append(ShapeRow(s, "fp32", "NVIDIA H100 80GB HBM3", mode, result(s, base, times, mode),
                                 tried=8, correct=5, kernel_path=str(cu)))
    rows.append(ShapeRow((8, 16, 32), "fp32", "NVIDIA H100 80GB HBM3", "offline", None, tried=3, correct=0))
    return rows


def test_summary_statistics():
    rows = [ShapeRow((64, 64, 64 * (i + 1)), "fp32", "g", "offline",
                     result((64, 64, 64 * (i + 1)), 1.0, {"torch": s})) for i, s in enumerate([0.5, 1.5, 2.5])]
    rows.append(ShapeRow((1, 1, 1), "fp32", "g", "offline", None))
    st = summarise(rows, "torch")
    assert st["n"] == 3 and st["n_all"] == 4
    assert st["mean"] == pytest.approx(1.5) and st["median"] == pytest.approx(1.5)
    assert st["win_rate"] == pytest.approx(0.5)  # 2 wins of 4 shapes: the shape without a kernel is no win
    assert st["dispatch_mean"] == pytest.approx((1.0 + 1.5 + 2.5 + 1.0) / 4)
    assert st["geomean"] == pytest.approx((0.5 * 1.5 * 2.5) ** (1 / 3))
    # '-max' is the faster of NN/TN: with NN at 3 µs and TN at 2 µs against a 1 µs kernel, max-speedup is 2.
    r = ShapeRow((2, 2, 2), "fp32", "g", "offline",
                 result((2, 2, 2), 1.0, {"cublas-NN": 3.0, "cublas-TN": 2.0}))
    assert summarise([r], "cublas-max")["mean"] == pytest.approx(2.0)
    # a correct kernel timed without torch beside it (a power-steady big shape) is no loss to torch: left out
    st = summarise(rows + [r], "torch")
    assert st["n"] == 3 and st["n_all"] == 4 and st["win_rate"] == pytest.approx(0.5)
    st = summarise(rows + [r], "cublas-max")  # the shape with no correct kernel still counts, as no win
    assert st["n"] == 1 and st["n_all"] == 2 and st["win_rate"] == pytest.approx(0.5)


def test_html_is_self_contained(tmp_path):
    rows = rows_fixture(tmp_path)
    out = tmp_path / "run" / "report.html"
    text = render(rows, run="demo", out_path=out)
    assert not re.search(r"<(script|link|img|iframe)\b", text, re.I)
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "") and "https://" not in text
    assert "url(" not in text and "@import" not in text
    assert 'href="kernels/4096_4096_4096.cu"' in text  # relative link, so the run folder can move
    assert "no correct kernel" in text


def _read_png(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB/RGBA PNG (what Chromium writes) to an (h, w, ch) array."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        (length,), ctype = struct.unpack(">I", data[pos:pos + 4]), data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            w, h, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), f"unexpected PNG format {depth}/{color}"
            ch = 3 if color == 2 else 4
        elif ctype == b"IDAT":
            idat += body
        pos += 12 + length
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, w * ch + 1)
    out = np.zeros((h, w * ch), dtype=np.uint8)
    prev = np.zeros(w * ch, dtype=np.uint8)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].copy()
        if f == 1:  # Sub: a running sum per channel
            line = (np.cumsum(line.reshape(w, ch).astype(np.int64), axis=0) % 256).astype(np.uint8).ravel()
        elif f == 2:  # Up
            line = line + prev
        elif f in (3, 4):  # Average, Paeth: sequential within the row
            L, P = line.astype(np.int64).tolist(), prev.astype(np.int64).tolist()
            for x in range(len(L)):
                a = L[x - ch] if x >= ch else 0
                b = P[x]
                if f == 3:
                    L[x] = (L[x] + (a + b) // 2) & 255
                else:
                    c = P[x - ch] if x >= ch else 0
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    L[x] = (L[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            line = np.array(L, dtype=np.uint8)
        out[y] = line
        prev = line
    return out.reshape(h, w, ch)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--hide-scrollbars"]


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if p := shutil.which(name):
            return p
    if os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "-q", "chromium"], capture_output=True, timeout=900)
        return shutil.which("chromium")
    return None


def _chromium_run(exe: str, args: list[str]) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args], capture_output=True,
                              timeout=180)


@pytest.fixture(scope="module")
def chromium():
    exe = _chromium()
    if exe is None:
        pytest.skip("chromium is not installed and could not be installed (apt-get install -y chromium)")
    return exe


def test_report_renders_in_chromium(tmp_path, chromium):
    out = write_report(rows_fixture(tmp_path), run="demo", out_path=tmp_path / "run" / "report.html",
                       meta={"shapes": 5})
    png = tmp_path / "shot.png"
    r = _chromium_run(chromium, ["--window-size=1400,1800", f"--screenshot={png}", out.as_uri()])
    assert png.is_file(), r.stderr.decode()[-2000:]
    img = _read_png(png)[:, :, :3]
    assert img.shape[:2] == (1800, 1400)
    non_white = (img < 245).any(axis=2).mean()
    colours = len(np.unique(img.reshape(-1, 3), axis=0))
    assert non_white > 0.02, f"screenshot is nearly blank ({non_white:.1%} non-white pixels)"
    assert colours > 50, f"screenshot has only {colours} colours"
    # The plot's series colours are on screen (anti-aliasing aside, the marker centres are exact).
    for hexc in ("#dc2626", "#2563eb"):
        rgb = np.array([int(hexc[i:i + 2], 16) for i in (1, 3, 5)])
        near = (np.abs(img.astype(int) - rgb).sum(axis=2) < 60).sum()
        assert near > 20, f"no {hexc} plot markers in the screenshot"

    dom = _chromium_run(chromium, ["--dump-dom", out.as_uri()])
    assert dom.returncode == 0, dom.stderr.decode()[-2000:]
    html = dom.stdout.decode()
    assert html.count('<table class="summary"') == 1 and '<table class="per-shape">' in html
    for needle in ("torch.matmul", "cuBLASLt-heuristic", "cuBLASLt-AutoTuning", "offline mode", "server mode",
                   "win rate", "4096x4096x4096", "8x16x32", "<svg", "log2(M·N·K)"):
        assert needle in html, needle
    assert len(re.findall(r"<circle ", html)) >= 4 * 8  # 4 baselines × 8 (shape, mode) points, plus legend
    per_shape = html.split('<table class="per-shape">', 1)[1]
    assert len(re.findall(r"<tr>", per_shape)) == 1 + 9  # header + 4 shapes × 2 modes + the shape without kernel


def test_report_of_a_campaign_run(tmp_path):
    """`cudal2 report RUN` on a real campaign folder (GPU seam: recorded results): both final modes, links."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from test_campaign import campaign

    cfg, summary, _ = campaign(tmp_path, [(64, 64, 64), (128, 256, 512)], budget=4)
    r = subprocess.run([sys.executable, "-m", "agent.cli", "report", cfg.run, "--runs-dir", str(cfg.runs_dir)],
                       capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1])
    assert r.returncode == 0, r.stderr
    out = cfg.run_dir / "report.html"
    html = out.read_text()
    assert "offline mode (2 shapes)" in html and "server mode (2 shapes)" in html
    links = re.findall(r'href="(kernels/[0-9a-f]{64}\.cu)"', html)
    assert len(links) == 4 and all((cfg.run_dir / link).is_file() for link in links)
    assert "64x64x64" in html and "128x256x512" in html and '<table class="summary"' in html
    assert "no final measurement yet" not in html  # a finished campaign: every figure is a final measurement
    # three evaluations per final: the row says so and gives their range
    assert len(re.findall(r"\(median of 3 evaluations, \d\.\d{3}–\d\.\d{3}\)", html)) == 4
    (cfg.run_dir / "campaign.sqlite").unlink()  # as before the finals ran: the search's own figures, marked
    assert report_run(cfg.run, runs_dir=cfg.runs_dir).read_text().count("(search: no final measurement yet)") == 2
    bad = subprocess.run([sys.executable, "-m", "agent.cli", "report", "nope", "--runs-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "no archive for run" in bad.stderr
    # -o: a folder (existing, or named with a trailing slash) gets report.html inside; an unwritable path is an error
    (tmp_path / "dir").mkdir()
    assert report_run(cfg.run, runs_dir=cfg.runs_dir, out=tmp_path / "dir") == tmp_path / "dir" / "report.html"
    assert report_run(cfg.run, runs_dir=cfg.runs_dir, out=f"{tmp_path}/new/") == tmp_path / "new" / "report.html"
    (tmp_path / "afile").write_text("mine")
    with pytest.raises(ReportError, match="cannot write the report"):
        report_run(cfg.run, runs_dir=cfg.runs_dir, out=tmp_path / "afile" / "r.html")
    assert (tmp_path / "afile").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tmp") == []
