"""The capacity report of the real //deploy:vram binary (planner/capacity_report.h).

Golden structure: the SVG parses as XML, has one bar per GPU count asked for, and each bar's
segment heights are the plan's byte counts to one scale, within a pixel. The byte counts come
from `vram --json` for the same layouts (the plan the engine allocates from), the scale from
the bar's own capacity line. Then the page is rendered in headless Chromium and the screenshot
must be drawn (not blank) with the bars' colours in it.

Needs `bazel build //deploy:vram` (scripts/test.sh builds it) and Debian's chromium.
"""
import html
import json
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import report_screenshot  # noqa: E402  pylint: disable=wrong-import-position

VRAM = ROOT / "bazel-bin" / "deploy" / "vram"
SVG = "{http://www.w3.org/2000/svg}"
# The README's 405B example, compared on 4, 8 and 16 (8x2) H100s.
ARGS = ["--model=405b", "--weights=fp8", "--gpu=h100-80g", "--context=8192", "--users=10"]
GPUS = ["4", "8", "8x2"]


def vram(*args):
    return subprocess.run([str(VRAM), *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if not VRAM.exists():
        pytest.fail("bazel-bin/deploy/vram is missing: run bazel build //deploy:vram")
    tmp = tmp_path_factory.mktemp("report")
    page, svg = tmp / "capacity.html", tmp / "memory.svg"
    run = vram(*ARGS, "--gpus=" + ",".join(GPUS), "--report=" + str(page), "--svg=" + str(svg))
    # 4 x H100 cannot hold 405B in fp8: exit 1 (not every layout meets the target).
    assert run.returncode == 1, run.stderr
    assert run.stderr == ""
    plans = json.loads(vram(*ARGS, "--gpus=" + ",".join(GPUS), "--json").stdout)["layouts"]
    return {"dir": tmp, "page": page, "svg": svg, "text": run.stdout, "plans": plans}


def expected_segments(plan, stage_index):
    """The bar's segments, bottom to top, from the JSON plan: (name, bytes), zeros left out."""
    stage = plan["stages"][stage_index]
    out = [("runtime reserve", stage["runtime_reserve_bytes"])]
    out += [("weights: " + role, w["bytes_per_rank"]) for role, w in stage["weights"].items()]
    out += [("draft model weights", stage["draft_weight_bytes"]),
            ("step buffers", stage["activations"]["total_bytes"]),
            ("draft step buffers", stage["draft_activations_bytes"]),
            ("communicator", stage["comm"]["total_bytes"]),
            ("KV cache pool", stage["kv_pool_bytes"]),
            ("unallocated", max(0, stage["unallocated_bytes"])),
            ("safety margin", stage["safety_bytes"])]
    return [(name, b) for name, b in out if b > 0]


ROLE_ORDER = ["embedding", "attn_norm", "q", "k", "v", "o", "ffn_norm", "gate", "up", "down",
              "final_norm", "lm_head"]


def ordered(segments):
    """JSON objects lose the roles' order: sort the weights as the sharding table lists them."""
    def key(item):
        name = item[0]
        if name.startswith("weights: "):
            return (1, ROLE_ORDER.index(name[len("weights: "):]))
        order = ["runtime reserve", None, "draft model weights", "step buffers",
                 "draft step buffers", "communicator", "KV cache pool", "unallocated",
                 "safety margin"]
        return (order.index(name), 0)
    return sorted(segments, key=key)


def test_svg_parses_with_one_bar_per_gpu_count(report):
    root = ET.parse(report["svg"]).getroot()
    assert root.tag == SVG + "svg"
    bars = root.findall(f"{SVG}g[@class='bar']")
    assert [b.get("data-layout") for b in bars] == [
        "4 x h100-80g (tp=4), fp8", "8 x h100-80g (tp=8), fp8", "16 x h100-80g (tp=8, pp=2), fp8"]


def test_segment_heights_are_the_plans_bytes_within_a_pixel(report):
    root = ET.parse(report["svg"]).getroot()
    bars = root.findall(f"{SVG}g[@class='bar']")
    scales = []
    for bar, entry in zip(bars, report["plans"]):
        plan = entry["plan"]
        stage = int(bar.get("data-stage"))
        device = plan["stages"][stage]["device_bytes"]
        baseline = float(bar.get("data-baseline"))
        capacity = bar.find(f"{SVG}line[@class='capacity']")
        scale = (baseline - float(capacity.get("y1"))) / device  # pixels per byte, from the chart
        scales.append(scale)
        rects = bar.findall(f"{SVG}rect[@class='segment']")
        drawn = [(r.get("data-segment"), float(r.get("y")), float(r.get("height"))) for r in rects]
        want = ordered(expected_segments(plan, stage))
        assert [name for name, _, _ in drawn] == [name for name, _ in want]
        top = baseline
        for (name, y, height), (_, nbytes) in zip(drawn, want):
            assert abs(height - nbytes * scale) <= 1.0, (bar.get("data-layout"), name, height)
            assert abs((y + height) - top) <= 0.01, (name, "does not sit on the segment below")
            top = y
        # The target marker: everything but the pool, plus the target's KV.
        s = plan["stages"][stage]
        need = (sum(b for name, b in want if name not in ("KV cache pool", "unallocated"))
                + s["kv_target_bytes"])
        target = bar.find(f"{SVG}line[@class='target']")
        assert abs(baseline - float(target.get("y1")) - need * scale) <= 1.0
    # One scale for every bar (same device, same height for its memory).
    assert max(scales) - min(scales) < 1e-15
    # The fitting 8-GPU bar fills its device to the line; the 4-GPU bar runs over it.
    fills = [sum(float(r.get("height")) for r in b.findall(f"{SVG}rect[@class='segment']"))
             for b in bars]
    device_px = report["plans"][1]["plan"]["stages"][0]["device_bytes"] * scales[1]
    assert abs(fills[1] - device_px) <= 1.0
    assert fills[0] > device_px


def test_page_is_self_contained_with_version_inputs_verdicts_and_command(report):
    page = report["page"].read_text(encoding="utf-8")
    assert "<script" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?https?:""", page)
    assert "@import" not in page and "url(" not in page
    version = re.search(r'kTpserveVersion\[\] = "([^"]+)"',
                        (ROOT / "base/version.h").read_text()).group(1)
    assert f"tpserve {version}" in page
    text = html.unescape(page)
    # The verdicts exactly as the text report prints them, one per layout.
    verdicts = [line for line in report["text"].splitlines() if line.startswith("VERDICT   ")]
    assert len(verdicts) == 3
    for line in verdicts:
        assert re.search(r'<pre class="verdict (fits|over)">' + re.escape(line) + "</pre>", text), line
    assert "--gpus=4,8,8x2" in text and "--report=" in text  # the command line
    assert "126 layers, hidden 16,384, 128 heads (8 KV) of 128, vocab 128,256" in text
    # Three charts, each valid XML on its own.
    charts = re.findall(r"<svg .*?</svg>", page, flags=re.S)
    assert len(charts) == 3
    for chart in charts:
        ET.fromstring(chart)
    curve = ET.fromstring(charts[1])
    series = curve.findall(f"{SVG}g[@class='series']")
    assert len(series) == 3
    for s, entry in zip(series, report["plans"]):
        points = {int(c.get("data-context")): int(c.get("data-sequences"))
                  for c in s.findall(f"{SVG}circle")}
        assert min(points) == 1024 and max(points) == 131072
        # At the target's context the curve is the plan's own capacity.
        assert points[8192] == entry["plan"]["max_concurrent_sequences"]
    target = curve.find(f"{SVG}g[@class='target']")
    assert (target.get("data-context"), target.get("data-sequences")) == ("8192", "10")


def test_unwritable_report_is_a_clear_error(report):
    bad = report["dir"] / "no-such-dir" / "x.html"
    run = vram(*ARGS, "--gpus=8", "--report=" + str(bad))
    assert run.returncode == 2
    assert run.stderr == f"vram: --report={bad}: cannot write: No such file or directory\n"
    run = vram(*ARGS, "--gpus=8,12")  # 12 does not divide 405B's 128 query heads
    assert run.returncode == 2
    assert "--gpus=12 --pp=1 --weights=fp8: tensor-parallel degree 12" in run.stderr


# The bars' colours (planner/capacity_report.cc): each must cover a visible area.
COLOURS = {
    "runtime reserve": (0x7f, 0x7f, 0x7f),
    "weights: q": (0x08, 0x51, 0x9c),
    "weights: gate": (0x00, 0x6d, 0x2c),
    "weights: down": (0x74, 0xc4, 0x76),
    "KV cache pool": (0xf2, 0xc1, 0x2e),
    "safety margin": (0x8c, 0x56, 0x4b),
}


def test_page_renders_in_headless_chromium_with_the_bars_colours(report):
    png = report["dir"] / "page.png"
    report_screenshot.screenshot(report["page"], png)
    from PIL import Image  # pylint: disable=import-outside-toplevel
    image = Image.open(png).convert("RGB")
    assert image.width == report_screenshot.WIDTH and image.height > 1000
    counts = {}
    for count, colour in image.getcolors(maxcolors=1 << 20):
        counts[colour] = count
    white = counts.get((255, 255, 255), 0)
    assert white < 0.95 * image.width * image.height, "the page rendered blank"
    assert len(counts) > 50
    for name, colour in COLOURS.items():
        assert counts.get(colour, 0) >= 200, f"{name} {colour}: {counts.get(colour, 0)} pixels"


def test_vram_commands_in_the_docs_use_real_flags():
    """Docs are code: every `//deploy:vram` command in README.md and docs/CAPACITY.md names flags
    the binary has."""
    known = set(re.findall(r"^  --(\w+)", vram("--help").stdout, flags=re.M))
    assert {"gpus", "weights", "report", "svg"} <= known
    seen = 0
    for doc in ("README.md", "docs/CAPACITY.md"):
        text = (ROOT / doc).read_text(encoding="utf-8").replace("\\\n", " ")
        for command in re.findall(r"//deploy:vram -- ([^\n`]*)", text):
            seen += 1
            for flag in re.findall(r"(?:^|\s)--([\w-]+)", command):
                assert flag.replace("-", "_") in known, f"{doc}: --{flag} in: {command}"
    assert seen >= 5
