#!/usr/bin/env python3
"""soakgen: a seed replays the same operations; other seeds give others; every kind the issue
lists is produced, with parameters that fit the guests (TAP)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import soakgen  # noqa: E402

results = []


def check(name, ok, detail=""):
    results.append((name, ok, detail))


a = soakgen.generate(12345, 500)
b = soakgen.generate(12345, 500)
check("same seed, same 500 operations", a == b)
check("a prefix is the same list", soakgen.generate(12345, 50) == a[:50])
c = soakgen.generate(12346, 500)
check("another seed, other operations", a != c)
differ = sum(1 for x, y in zip(a, c) if x != y)
check("most steps differ between seeds (%d of 500)" % differ, differ > 400)
kinds = {op["kind"] for op in soakgen.generate(7, 2000)}
missing = set(soakgen.WEIGHTS) - kinds
check("every kind appears in 2000 steps", not missing, "missing: %s" % sorted(missing))
labels = {g["label"]: g for g in soakgen.GUESTS}
bad = []
for op in soakgen.generate(99, 2000):
    g = labels.get(op.get("guest"))
    if "guest" in op and g is None:
        bad.append(op)
    elif op["kind"] == "vcpupin" and not 0 <= op["vcpu"] < g["vcpus"]:
        bad.append(op)
    elif op["kind"] == "managedsave-start" and not g["persistent"]:
        bad.append(op)
    elif op["kind"] == "iothreadpin" and not 1 <= op["iothread"] <= g.get("iothreads", 0):
        bad.append(op)
    elif op.get("cpus") is not None and op["cpus"] not in soakgen.SETS:
        bad.append(op)
check("parameters fit the guests", not bad, "first: %s" % (bad[:1],))
check("the guests cover own pins of every kind",
      any(g.get("vcpupins") for g in soakgen.GUESTS) and any(g.get("cpuset") for g in soakgen.GUESTS)
      and any(g.get("emulatorpin") for g in soakgen.GUESTS)
      and any(g.get("iothreads") for g in soakgen.GUESTS)
      and any("preferred" not in g for g in soakgen.GUESTS))

print("1..%d" % len(results))
failed = 0
for i, (name, ok, detail) in enumerate(results, 1):
    print("%s %d - %s" % ("ok" if ok else "not ok", i, name))
    if not ok:
        failed += 1
        print("# " + detail)
sys.exit(1 if failed else 0)
