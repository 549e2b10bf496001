#!/usr/bin/env python3
"""Reads one perf_analyzer run's output; prints one PASS/FAIL line.

Usage: pa_parse.py NAME EXIT_STATUS OUTPUT_FILE
PASS needs: exit 0; the summary lists concurrency 1..4 (the sweep ran to its end); every level has
a "Server:" block (the statistics extension was listed and its numbers were read); the server's
successful request count is within 2*concurrency+2 of the client's request count (requests in flight
at a window's two edges are counted by one side only). A name with "dynamic_batching" also needs
execution count < inference count at concurrency 4 (batches formed); one with "max_batch_size_0"
needs them equal at every level.
"""
import re
import sys

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
    notes.append("c%d %d/%d" % (c, n, s))
print("PASS %s (client/server requests: %s)" % (name, ", ".join(notes)))
