#!/usr/bin/env python3
"""Reads one perf_analyzer run's output; prints one PASS/FAIL line.

Usage: pa_parse.py NAME EXIT_STATUS OUTPUT_FILE
PASS needs: exit 0; the summary lists concurrency 1..4 (the sweep ran to its end); every level has
a "Server:" block (the statistics extension was listed and its numbers were read); the server's
successful request count is within 2*concurrency+2 of the client's request count (requests in flight
at a window's two edges are counted by one side only). A name with "dynamic_batching" also needs
execution count < inference count at concurrency 4 (batches formed); one with "max_batch_size_0"
needs them equal at every level. A name with "ensemble_MODEL" (an ensemble of ensembles.py) also
needs, at every level, a "Composing models:" block that lists exactly MODEL's steps (pinned versions
as they resolve), each composing model (nested ones included) with a successful request count of about
its runs per request (ensembles.py) times the ensemble's.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ensembles import ENSEMBLES  # noqa: E402

name, rc, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
text = open(path, errors="replace").read()


def fail(reason):
    print("FAIL %s: %s" % (name, reason.replace("\n", " ")[:300]))
    sys.exit(0)


if rc != 0:
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    errs = ([l for l in lines if "had error" in l] + [l for l in lines if l.startswith("error")]
            + [l for l in lines if "failed" in l.lower()])
    fail("exit %d: %s" % (rc, errs[0] if errs else (lines[-1] if lines else "no output")))
if "No valid requests recorded" in text:
    fail("'No valid requests recorded' (no response completed in a window)")
levels = sorted({int(c) for c in re.findall(r"^Concurrency: (\d+),", text, re.M)})
if levels != [1, 2, 3, 4]:
    why = [l for l in text.splitlines() if "Failed to obtain stable" in l or "error" in l.lower()]
    fail("summary lists concurrency %s, want 1..4%s" % (levels, (": " + why[-1]) if why else ""))


def composing(c, block, model, ens_success):
    """Checks the "Composing models:" breakdown of concurrency c's report of ensemble model."""
    at = re.search(r"^( *)Composing models:", block, re.M)
    if at is None:
        fail("concurrency %d: no 'Composing models:' breakdown for ensemble %s" % (c, model))
    rows = []  # (indent, name, version, successful request count)
    parts = re.split(r"^( *)(\S+), version: (\S*)\s*$", block[at.start():], flags=re.M)
    for k in range(1, len(parts) - 1, 4):
        succ = re.search(r"(?:Successful request|Request) count: (\d+)", parts[k + 3])
        rows.append((len(parts[k]), parts[k + 1], parts[k + 2], int(succ.group(1)) if succ else -1))
    runs = ENSEMBLES[model]["runs"]
    direct = sorted((n, v) for i, n, v, _ in rows if i == len(at.group(1)))
    want = sorted({n for n, _ in runs})  # every ensemble of ensembles.py lists its direct steps
    if sorted({n for n, _ in direct}) != want:
        fail("concurrency %d: composing models %s, want %s" % (c, direct, want))
    total = {}
    for (n, v), k in runs.items():
        total[n] = total.get(n, 0) + k
    for _, n, v, got in rows:
        versions = [rv for (rn, rv) in runs if rn == n and rv]
        if versions and v not in versions:
            fail("concurrency %d: composing %s version %s, want %s" % (c, n, v, versions))
        want_n = total.get(n, 0) * ens_success
        if abs(got - want_n) > total.get(n, 1) * (2 * c + 2):
            fail("concurrency %d: composing %s v%s counted %d successful requests, want about %d (%d per %s request)"
                 % (c, n, v, got, want_n, total.get(n, 0), model))


blocks = re.split(r"^Request concurrency: (\d+)\s*$", text, flags=re.M)
seen = {}
for k in range(1, len(blocks) - 1, 2):
    seen[int(blocks[k])] = blocks[k + 1]
notes = []
for c in (1, 2, 3, 4):
    b = seen.get(c)
    if b is None:
        fail("no report for concurrency %d" % c)
    client = re.search(r"Client:\s*\n\s*Request count: (\d+)", b)
    if "  Server:" not in b:
        fail("concurrency %d: no server-side statistics (is 'statistics' in /v2 extensions?)" % c)
    infer = re.search(r"Inference count: (\d+)", b)
    execs = re.search(r"Execution count: (\d+)", b)
    succ = re.search(r"Successful request count: (\d+)", b)
    if not (client and infer and execs and succ):
        srv = b[b.index("  Server:"):].strip().splitlines()[:3]
        fail("concurrency %d: server stats incomplete: %s" % (c, " / ".join(srv)))
    n, i, e, s = (int(m.group(1)) for m in (client, infer, execs, succ))
    if abs(s - n) > 2 * c + 2:
        fail("concurrency %d: server counted %d successful requests, client sent %d" % (c, s, n))
    if "max_batch_size_0" in name and e != i:
        fail("concurrency %d: execution count %d != inference count %d (max_batch_size 0 batched)" % (c, e, i))
    if "dynamic_batching" in name and c == 4 and not e < i:
        fail("concurrency 4: execution count %d, inference count %d: no batch formed" % (e, i))
    if "ensemble_" in name:
        composing(c, b, name.split("ensemble_", 1)[1], s)
    notes.append("c%d %d/%d" % (c, n, s))
print("PASS %s (client/server requests: %s)" % (name, ", ".join(notes)))
