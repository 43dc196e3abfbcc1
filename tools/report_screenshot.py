#!/usr/bin/env python3
"""Renders a page in headless Chromium (Debian's `chromium`) to a PNG, cropped to its content.

Used by tests/report (is the capacity report's page drawn, with its bars' colours?) and to make
the screenshot docs/CAPACITY.md shows:

    bazel build //deploy:vram
    python3 tools/report_screenshot.py --out docs/images/capacity-405b-fp8.png -- \\
        --model=405b --weights=fp8 --gpu=h100-80g --gpus=4,8,8x2 --context=8192 --users=10

With arguments after "--", it runs bazel-bin/deploy/vram with them and --report first; with
--page it renders an existing HTML file.
"""
import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
WIDTH = 1400
MAX_HEIGHT = 4000


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(page, png, width=WIDTH, height=MAX_HEIGHT):
    """Renders `page` (an HTML file) at width x height CSS pixels into `png`, then crops the
    blank rows under the content. Raises RuntimeError when Chromium is missing or fails."""
    browser = chromium_binary()
    if browser is None:
        raise RuntimeError("chromium is not installed (scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--disable-extensions", "--force-device-scale-factor=1",
               "--user-data-dir=" + profile, "--window-size=%d,%d" % (width, height),
               "--screenshot=" + str(png), pathlib.Path(page).resolve().as_uri()]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                             env=dict(os.environ, HOME=profile))
    if run.returncode != 0 or not pathlib.Path(png).exists():
        raise RuntimeError("chromium failed (%d): %s" % (run.returncode, run.stderr[-2000:]))
    from PIL import Image, ImageChops  # pylint: disable=import-outside-toplevel
    image = Image.open(png).convert("RGB")
    background = Image.new("RGB", image.size, (255, 255, 255))
    box = ImageChops.difference(image, background).getbbox()
    if box is not None:
        image = image.crop((0, 0, image.width, min(image.height, box[3] + 24)))
    image.save(png, optimize=True)
    return png


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--page", help="an HTML page to render instead of running vram")
    parser.add_argument("--vram", default=str(ROOT / "bazel-bin/deploy/vram"))
    parser.add_argument("vram_args", nargs="*", help="vram's flags (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        page = args.page
        if page is None:
            # Relative, so that the page's command line reads as the README's.
            page = os.path.join(tmp, "capacity-405b.html")
            run = subprocess.run([os.path.abspath(args.vram), *args.vram_args,
                                  "--report=capacity-405b.html"],
                                 capture_output=True, text=True, cwd=tmp)
            if run.returncode not in (0, 1):
                sys.exit("vram failed (%d): %s" % (run.returncode, run.stderr))
        screenshot(page, args.out)
    # A picture for the docs: 256 colours keep it small and the charts' flat colours exact.
    from PIL import Image  # pylint: disable=import-outside-toplevel
    Image.open(args.out).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                                 dither=Image.Dither.NONE).save(args.out,
                                                                                optimize=True)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
