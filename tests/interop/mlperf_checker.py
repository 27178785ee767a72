"""What the MLPerf log interop scripts share: running the official compliance checker on a log, the
objections it raised, and reading the log's lines as mllog.py's own encoder writes them."""
import os
import re
import subprocess
import sys

from mlperf_logging.mllog import mllog

from crest_run import run, strict_json

SEPARATOR = "\n" + "-" * 30 + "\n"


def train_logged(crest, datagen, config, overrides, tmp):
    """`crest datagen` then `crest train` with a submitter's mlperf settings into tmp:
    (what the run printed, the path of its mllog.txt)."""
    data, out = os.path.join(tmp, "data"), os.path.join(tmp, "run")
    run([crest, "datagen", *datagen, "--out", data])
    printed = run([crest, "train", "--config", config, f"data.data_dir={data}", f"output_dir={out}",
                   *overrides, "mlperf.org=crest-interop", "mlperf.division=closed",
                   "mlperf.status=research", "mlperf.platform=cpu-test"])
    return printed, os.path.join(out, "mllog.txt")


def run_checker(log, usage, ruleset, checker_log):
    """`python -m mlperf_logging.compliance_checker` as a submitter runs it: (exit code, verdict)."""
    r = subprocess.run([sys.executable, "-m", "mlperf_logging.compliance_checker", "--usage", usage,
                        "--ruleset", ruleset, "--log_output", checker_log, log],
                       capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def objections(checker_log):
    """The checker's messages (it joins them with a line of 30 dashes after 'WARNING - ')."""
    text = open(checker_log).read()
    start = text.find("WARNING - ")
    if start < 0:
        return []
    body = text[start + len("WARNING - "):]
    body = body[:body.rfind("ERROR - FAILED")] if "ERROR - FAILED" in body else body
    return [m.strip() for m in body.split(SEPARATOR) if m.strip()]


def classify(message):
    """(key, failed test) of a 'CHECK for KEY failed' message; None for any other message."""
    m = re.match(r"CHECK for '(\w+)' failed in line \d+:", message)
    test = re.search(r"^failed test:\s+(.*)$", message, re.M)
    return (m.group(1), test.group(1).strip()) if m and test else None


def read_events(log):
    """The log's events: every line strict JSON and byte for byte mllog.py's encoding of it."""
    with open(log, encoding="ascii") as f:
        lines = f.read().splitlines()
    events = []
    for line in lines:
        assert line.startswith(":::MLLOG "), line
        e = strict_json(line[len(":::MLLOG "):])
        assert list(e) == ["namespace", "time_ms", "event_type", "key", "value", "metadata"], line
        assert isinstance(e["time_ms"], int), line
        ref = mllog._encode_log(e["namespace"], e["time_ms"], e["event_type"], e["key"], e["value"], e["metadata"])
        assert ref == line, f"crest:  {line}\nmllog:  {ref}"
        events.append(e)
    return lines, events
