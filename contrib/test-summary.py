#!/usr/bin/env python3
"""Summarises meson's testlog.json: prints 'N passed, N failed, N skipped'.

Exits non-zero when a test failed, or when a test was skipped while SOFTAFF_REQUIRE_VM=1
(then nothing may be skipped: CI must prove the integration tests really ran)."""
import json
import os
import sys

passed = failed = skipped = 0
skipped_names = []
with open(sys.argv[1], encoding="utf-8") as log:
    for line in log:
        line = line.strip()
        if not line:
            continue
        t = json.loads(line)
        result = t.get("result", "")
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
            skipped_names.append(t.get("name", "?"))
        else:
            failed += 1

require_vm = os.environ.get("SOFTAFF_REQUIRE_VM") == "1"
if skipped_names:
    print("skipped: " + ", ".join(skipped_names))
    if require_vm:
        print("SOFTAFF_REQUIRE_VM=1: skipped tests count as failures")
        failed += skipped
        skipped = 0
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
