"""The performance report (docs/report.md) rendered by a real browser: headless Chromium.

Two reports are made: a tiny `crest train` run with train.report=true (two epochs, validation,
the peak measured) and a tiny `crest bench train --report DIR --profile --peak-gflops P`. For
each, report.json must hold the figures the command printed (epoch lines, the bench JSON lines),
and report.html is opened in headless Chromium over the DevTools protocol (--remote-debugging-pipe,
so no port and no extra Python package) to check that:

  * the page loads with no console message of level error, no uncaught exception and no request
    other than the page itself (the page's CSP forbids fetches; a violation would be logged);
  * every chart the report should have is in the rendered DOM as an <svg> with a real size, and its
    marks (bars, lines, dots) have non-empty geometry; the layer charts have one row per layer;
  * the markup has no URL a browser could fetch (src/href/url(), http(s)://) and every <svg> is
    well-formed XML on its own (the HTML parser would silently repair a broken one);
  * a screenshot of the page is not blank and shows the chart colours.

Chromium is the Debian package `chromium` (scripts/install-deps.sh installs it). Without it the
test fails under CI (CI=true) and is skipped elsewhere (exit 77, which CTest reports as skipped).

Run: CREST_BINARY=build/bin/crest python3 tests/interop/report_render.py
"""
import base64
import fcntl
import json
import math
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
import zlib

CREST = os.environ.get("CREST_BINARY", "build/bin/crest")
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77

TRAIN_CHARTS = ["chart-loss", "chart-mae", "chart-throughput", "chart-time", "chart-layer-time",
                "chart-layer-gflops"]
BENCH_CHARTS = ["chart-time", "chart-layer-time", "chart-layer-gflops"]


def find_chromium():
    for name in (os.environ.get("CREST_CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def close(a, b, rel=1e-9, abs_=0.0):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


# ---------------------------------------------------------------- the runs and their numbers

def run(args):
    r = subprocess.run(args, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(args)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}"
    return r


def check_train(tmp):
    """crest train with train.report=true: report.json holds what the epoch lines print."""
    out = os.path.join(tmp, "train-run")
    r = run([CREST, "train", "--config", os.path.join(SOURCE, "configs", "cosmoflow-demo.yaml"),
             "data.n_train=8", "data.n_valid=4", "data.n_epochs=2", "model.conv_size=4",
             "crest.threads=2", "train.report=true", f"output_dir={out}"])
    assert f"report: {out}/report.html" in r.stdout, r.stdout
    if "| backend onednn " not in r.stdout:
        # The expectations below (layer table, fused layers, a measured peak) are oneDNN's.
        print("SKIP: the default backend is not onednn (a build without oneDNN)")
        sys.exit(77)
    rep = json.load(open(os.path.join(out, "report.json")))
    assert rep["format"] == "crest performance report" and rep["version"] == 1, rep.keys()
    run_ = rep["run"]
    assert run_["source"] == "crest train" and run_["backend"] == "onednn", run_
    assert run_["isa"].startswith("oneDNN ") and ", crest loops " in run_["isa"], run_
    assert run_["threads_per_rank"] == 2 and run_["ranks"] == 1 and run_["batch_per_rank"] == 4, run_
    assert run_["steps_per_epoch"] == 2 and run_["train_samples"] == 8 and run_["eval_samples"] == 4, run_
    done = re.search(r"done: (\d+) epochs .*; ([\d,]+) parameters; status (\w+)", r.stdout)
    assert done, r.stdout
    assert run_["parameter_count"] == int(done.group(2).replace(",", "")), (run_, done.group(0))
    assert run_["status"] == done.group(3), run_
    epochs = rep["epochs"]
    lines = [l for l in r.stdout.splitlines() if l.startswith("epoch ")]
    assert len(epochs) == len(lines) == int(done.group(1)) == 2, (epochs, lines)
    for e, line in zip(epochs, lines):
        w = line.split()
        printed = {w[i]: w[i + 1] for i in range(2, len(w) - 1)}
        assert int(w[1].split("/")[0]) == e["epoch"], (line, e)
        # Printed with 4 (loss), 5 (lr) and 2 (samples/s) decimals: equal at that precision.
        for key, field, dec in [("loss", "train_loss", 4), ("val_loss", "val_loss", 4),
                                ("val_mae", "val_mae", 4), ("lr", "lr", 5)]:
            assert abs(float(printed[key]) - e[field]) <= 0.5 * 10 ** -dec + 1e-12, (key, line, e)
        sps = float(re.search(r"([\d.]+) samples/s", line).group(1))
        assert abs(sps - e["samples_per_s"]) <= 0.005 + 1e-9, (line, e)
        wait = float(re.search(r"data wait ([\d.]+)%", line).group(1))
        assert abs(wait - 100 * e["data_wait_s"] / e["train_seconds"]) <= 0.05 + 1e-9, (line, e)
        assert e["validated"] is True and e["seconds"] >= e["train_seconds"] > 0, e
    t = rep["time"]
    assert close(t["steps_s"], sum(e["train_seconds"] for e in epochs)), t
    assert close(t["data_wait_s"], sum(e["data_wait_s"] for e in epochs)), t
    assert close(t["compute_s"], max(0.0, t["steps_s"] - t["data_wait_s"] - t["allreduce_exposed_s"])), t
    assert close(run_["samples_per_s"], 2 * 2 * 4 / t["steps_s"]), run_  # 2 epochs x 2 steps x 4
    check_layers(rep, profiled_steps=4)
    peak = rep["peak"]
    assert peak["source"] == "measured" and peak["gflops"] > 0 and "2048" in peak["how"], peak
    return out, rep


def check_layers(rep, profiled_steps):
    layers, peak = rep["layers"], rep["peak"]["gflops"]
    assert rep["profiled_steps"] == profiled_steps, rep["profiled_steps"]
    names = [l["name"] for l in layers]
    assert names[:3] == ["conv1", "pool1", "act1"] and "fc3" in names, names
    # The layers' FLOPs are the step's: the table accounts for all the work.
    total = sum(l["gflop_per_step"] for l in layers)
    assert close(total, rep["run"]["train_gflop_per_step"], rel=1e-9), (total, rep["run"])
    for l in layers:
        assert l["forward_ms"] >= 0 and l["backward_ms"] >= 0, l
        ms = l["forward_ms"] + l["backward_ms"]
        if ms > 0:
            want = l["gflop_per_step"] / (ms / 1e3)
            assert close(l["gflops"], want, rel=1e-9), (l, want)
            assert close(l["percent_of_peak"], 100 * l["gflops"] / peak, rel=1e-9), (l, peak)
        else:
            assert l["gflops"] is None and l["percent_of_peak"] is None, l


def check_bench(tmp):
    """crest bench train --report: report.json holds the figures of the printed JSON lines."""
    out = os.path.join(tmp, "bench")
    r = run([CREST, "bench", "train", "--size", "32", "--batch", "2", "--steps", "2", "--warmup", "1",
             "--conv-size", "4", "--threads", "2", "--profile", "--report", out, "--peak-gflops", "100"])
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    head, per_layer = lines[0], lines[1:]
    assert head["report"] == os.path.join(out, "report.html"), head
    assert f"report: {out}/report.html" in r.stderr, r.stderr
    rep = json.load(open(os.path.join(out, "report.json")))
    run_ = rep["run"]
    assert run_["source"] == "crest bench train" and rep["epochs"] == [], run_
    assert close(run_["samples_per_s"], head["samples_per_s"]), (run_, head)
    assert close(run_["step_s"], head["step_s_min"]) and close(run_["step_s_median"], head["step_s_median"])
    assert close(run_["train_gflop_per_step"], head["gflop_per_sample"] * 2, rel=1e-9), (run_, head)
    assert run_["threads_per_rank"] == head["threads"] == 2 and run_["ranks"] == head["ranks"] == 1
    assert rep["peak"] == {"gflops": 100.0, "source": "given", "dtype": "f32",
                           "how": rep["peak"]["how"]} and "--peak-gflops" in rep["peak"]["how"], rep["peak"]
    assert len(per_layer) == len(rep["layers"]), (len(per_layer), len(rep["layers"]))
    for printed, l in zip(per_layer, rep["layers"]):
        assert printed["layer"] == l["name"] and printed["kind"] == l["kind"], (printed, l)
        for key in ("forward_ms", "backward_ms"):
            assert close(printed[key], l[key], rel=1e-12), (key, printed, l)
        for key in ("forward_gflops", "backward_gflops"):  # bench prints 0 where no time was measured
            assert close(printed[key], l[key] if l[key] is not None else 0.0, rel=1e-12), (key, printed, l)
    check_layers(rep, profiled_steps=2)
    assert rep["time"]["data_wait_s"] == 0 and rep["time"]["steps_s"] > 0, rep["time"]
    return out, rep


def check_bad_report_dir(tmp):
    """An unwritable --report directory is refused before the benchmark, naming the path."""
    blocker = os.path.join(tmp, "a-file")
    open(blocker, "w").close()
    bad = os.path.join(blocker, "sub")
    r = subprocess.run([CREST, "bench", "train", "--size", "32", "--batch", "1", "--steps", "1",
                        "--conv-size", "4", "--threads", "1", "--report", bad], capture_output=True, text=True)
    assert r.returncode == 2 and bad in r.stderr and not r.stdout.strip(), (r.returncode, r.stdout, r.stderr)


# ---------------------------------------------------------------- the page, statically

URL_ATTR = re.compile(r"\s(src|href|xlink:href|action|srcset|poster|formaction|background)\s*=", re.I)
SVG_NS = 'xmlns="http://www.w3.org/2000/svg"'


def check_markup(path, charts):
    page = open(path, encoding="utf-8").read()
    assert page.startswith("<!DOCTYPE html>"), page[:40]
    # The SVG namespace is a name, not a fetch; anything else with a scheme could be fetched.
    rest = page.replace(SVG_NS, "")
    assert not re.search(r"[a-z][a-z0-9+.-]*://", rest, re.I), re.search(r".{40}[a-z]+://.{40}", rest).group(0)
    assert not URL_ATTR.search(page), URL_ATTR.search(page)
    assert "url(" not in page and "@import" not in page and "<script" not in page.lower()
    svgs = re.findall(r"<svg\b.*?</svg>", page, re.S)
    ids = []
    for svg in svgs:
        root = ET.fromstring(svg)  # raises on any markup mistake
        ids.append(root.get("id"))
    assert ids == [i for i in ids if i in charts] and sorted(ids) == sorted(charts), (ids, charts)


# ---------------------------------------------------------------- the page, in Chromium

class Chromium:
    """Headless Chromium driven over the DevTools protocol on fds 3 (commands) and 4 (replies)."""

    def __init__(self, exe, profile_dir):
        to_chrome_r, self.to_chrome = os.pipe()
        self.from_chrome, from_chrome_w = os.pipe()
        a = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        b = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)

        def fds():  # in the child: the pipe ends where --remote-debugging-pipe expects them
            os.dup2(a, 3)
            os.dup2(b, 4)

        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        args = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--hide-scrollbars", "--remote-debugging-pipe", f"--user-data-dir={profile_dir}",
                "about:blank"]
        self.proc = subprocess.Popen(args, pass_fds=(3, 4), preexec_fn=fds, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        for fd in (to_chrome_r, from_chrome_w, a, b):
            os.close(fd)
        self.buf = b""
        self.next_id = 0
        self.events = []

    def _read_message(self, deadline):
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no reply from Chromium")
            ready, _, _ = select.select([self.from_chrome], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                continue
            chunk = os.read(self.from_chrome, 1 << 20)
            if not chunk:
                err = self.proc.stderr.read().decode(errors="replace") if self.proc.poll() is not None else ""
                raise RuntimeError(f"Chromium closed the DevTools pipe (exit {self.proc.poll()}):\n{err[-3000:]}")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read_message(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m["result"]
            self.events.append(m)

    def wait_event(self, method, session, timeout=30):
        deadline = time.monotonic() + timeout
        for i, m in enumerate(self.events):
            if m.get("method") == method and m.get("sessionId") == session:
                return self.events.pop(i)
        while True:
            m = self._read_message(deadline)
            if m.get("method") == method and m.get("sessionId") == session:
                return m
            self.events.append(m)

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 -- it is going away either way
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_chrome)
        os.close(self.from_chrome)


# Runs in the page: the size of every chart and of its marks on screen (transforms included), as
# the layout engine computed them.
MEASURE = r"""JSON.stringify({
  charts: [...document.querySelectorAll('svg.chart')].map(s => {
    const r = s.getBoundingClientRect();
    const box = e => { const b = e.getBoundingClientRect(); return [b.width, b.height]; };
    const marks = [...s.querySelectorAll('.bars rect, .series path, .series circle')].map(box);
    const rows = [...s.querySelectorAll('.row')].map(g => [...g.querySelectorAll('rect')].map(e => box(e)[0]));
    return {id: s.id, width: r.width, height: r.height, marks, rows};
  }),
  scripts: document.scripts.length,
  title: document.title,
  height: document.documentElement.scrollHeight
})"""


def png_pixels(data):
    """RGB(A) 8-bit PNG -> (width, height, channels, rows of bytes). Enough for Chromium's output."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and color in (2, 6) and interlace == 0, (depth, color, interlace)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    ch = 4 if color == 6 else 3
    raw, stride = zlib.decompress(idat), w * ch
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - ch] if i >= ch else 0
            up, ul = prev[i], prev[i - ch] if i >= ch else 0
            if f == 1:
                line[i] = (line[i] + left) & 255
            elif f == 2:
                line[i] = (line[i] + up) & 255
            elif f == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 255
            elif f == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else ul)) & 255
        rows.append(line)
        prev = line
    return w, h, ch, rows


def check_in_browser(browser, path, charts, layers):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    for domain in ("Page", "Runtime", "Log", "Network"):
        browser.send(f"{domain}.enable", session=session)
    browser.send("Emulation.setDeviceMetricsOverride",
                 {"width": 1200, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
    url = "file://" + os.path.abspath(path)
    browser.send("Page.navigate", {"url": url}, session=session)
    browser.wait_event("Page.loadEventFired", session)
    got = json.loads(browser.send("Runtime.evaluate", {"expression": MEASURE, "returnByValue": True},
                                  session=session)["result"]["value"])
    shot = browser.send("Page.captureScreenshot",
                        {"format": "png", "captureBeyondViewport": True,
                         "clip": {"x": 0, "y": 0, "width": 1200, "height": got["height"], "scale": 0.25}},
                        session=session)
    # Everything the page logged or asked for while loading, rendering and being measured.
    mine = [m for m in browser.events if m.get("sessionId") == session]
    errors = [m for m in mine if m["method"] == "Runtime.exceptionThrown"
              or (m["method"] == "Runtime.consoleAPICalled" and m["params"]["type"] in ("error", "assert"))
              or (m["method"] == "Log.entryAdded" and m["params"]["entry"]["level"] == "error")]
    assert not errors, f"{path}: errors while rendering: {errors}"
    requests = [m["params"]["request"]["url"] for m in mine if m["method"] == "Network.requestWillBeSent"]
    assert requests == [url], f"{path}: requests other than the page itself: {requests}"
    browser.send("Target.closeTarget", {"targetId": target})

    assert got["scripts"] == 0 and got["title"].startswith("crest performance report"), got["title"]
    by_id = {c["id"]: c for c in got["charts"]}
    assert sorted(by_id) == sorted(charts), (sorted(by_id), charts)
    for c in got["charts"]:
        assert c["width"] > 200 and c["height"] > 100, c
        drawn = [m for m in c["marks"] if m[0] > 0 or m[1] > 0]
        assert drawn, f"{c['id']}: no mark with a size: {c['marks']}"
    # One row per layer in the layer charts, the longest bar where the most time went.
    rows = by_id["chart-layer-time"]["rows"]
    assert len(rows) == len(layers) == len(by_id["chart-layer-gflops"]["rows"]), (len(rows), len(layers))
    widths = [sum(r) for r in rows]
    ms = [l["forward_ms"] + l["backward_ms"] for l in layers]
    assert widths.index(max(widths)) == ms.index(max(ms)), (widths, ms)
    assert max(widths) > 100, widths

    w, h, ch, pixels = png_pixels(base64.b64decode(shot["data"]))
    assert w >= 250 and h >= 200, (w, h)
    colours, ink = set(), 0
    for row in pixels:
        for i in range(0, len(row), ch):
            px = (row[i], row[i + 1], row[i + 2])
            colours.add(px)
            ink += px != (255, 255, 255)
    assert ink > 0.02 * w * h and len(colours) > 20, f"{path}: the screenshot looks blank ({ink} px of ink)"
    # The bars' colours (forward #4c78a8, backward #f58518) reach the screen.
    for want in ((0x4c, 0x78, 0xa8), (0xf5, 0x85, 0x18)):
        assert any(max(abs(a - b) for a, b in zip(c, want)) <= 6 for c in colours), (want, path)
    return w, h


def main():
    chromium = find_chromium()
    if chromium is None:
        msg = "report_render: no chromium (Debian package `chromium`, installed by scripts/install-deps.sh)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            print(msg + ": FAILED (CI must have it)", file=sys.stderr)
            return 1
        print(msg + ": skipped", file=sys.stderr)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="crest-report-") as tmp:
        t0 = time.monotonic()
        train_dir, train_rep = check_train(tmp)
        bench_dir, bench_rep = check_bench(tmp)
        check_bad_report_dir(tmp)
        t1 = time.monotonic()
        check_markup(os.path.join(train_dir, "report.html"), TRAIN_CHARTS)
        check_markup(os.path.join(bench_dir, "report.html"), BENCH_CHARTS)
        browser = Chromium(chromium, os.path.join(tmp, "chromium-profile"))
        try:
            browser.send("Browser.getVersion")
            size = check_in_browser(browser, os.path.join(train_dir, "report.html"), TRAIN_CHARTS, train_rep["layers"])
            check_in_browser(browser, os.path.join(bench_dir, "report.html"), BENCH_CHARTS, bench_rep["layers"])
        finally:
            browser.close()
        t2 = time.monotonic()
    print(f"report_render: OK (crest runs {t1 - t0:.1f} s, Chromium checks {t2 - t1:.1f} s, "
          f"screenshot {size[0]}x{size[1]} at 1/4 scale)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
