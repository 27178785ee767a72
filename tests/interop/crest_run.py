"""What the crest interop scripts share: running a command that must succeed, and reading JSON
strictly (NaN or Infinity, which Python's json accepts and JSON does not, is an error)."""
import json
import subprocess


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def strict_json(text):
    def refuse(token):
        raise AssertionError(f"non-JSON token {token} in {text}")
    return json.loads(text, parse_constant=refuse)
