#!/usr/bin/env python3
"""Summarises meson's testlog.json: lists every skipped test and TAP subtest with the reason it
printed, then prints 'N passed, N failed, N skipped'.

Exits non-zero when a test failed, or when a test was skipped while SOFTAFF_REQUIRE_VM=1
(then nothing may be skipped: CI must prove the integration tests really ran)."""
import json
import os
import re
import sys

# 'SKIP: why' (scripts, softaff_testlib), '1..0 # SKIP why' (TAP plan), 'ok 3 name # SKIP why'.
_SKIP_LINE = re.compile(r"(?:^|\s|#\s*)SKIP:?\s+(.*)$")
_TAP_SKIP = re.compile(r"^ok\s+\d+\s*(.*?)\s*#\s*SKIP\b:?\s*(.*)$", re.I)


def output(t):
    return (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")


def skip_reason(t):
    """The last reason the test printed for skipping, else its exit status."""
    reason = None
    for line in output(t).splitlines():
        m = _SKIP_LINE.search(line.strip())
        if m and m.group(1).strip():
            reason = m.group(1).strip()
    return reason or "exit status %s, no reason printed" % t.get("returncode", "?")


def skipped_subtests(t):
    """[(subtest, reason)] of the TAP subtests a passing test skipped."""
    out = []
    for line in output(t).splitlines():
        m = _TAP_SKIP.match(line.strip())
        if m:
            out.append((m.group(1) or "?", m.group(2) or "no reason printed"))
    return out


def main(path):
    passed = failed = skipped = 0
    skips, sub_skips = [], []
    with open(path, encoding="utf-8") as log:
        for line in log:
            line = line.strip()
            if not line:
                continue
            t = json.loads(line)
            result = t.get("result", "")
            name = t.get("name", "?")
            if result in ("OK", "EXPECTEDFAIL"):
                passed += 1
                sub_skips += [(name, s, r) for s, r in skipped_subtests(t)]
            elif result == "SKIP":
                skipped += 1
                skips.append((name, skip_reason(t)))
            else:
                failed += 1

    for name, reason in skips:
        print("skipped: %s: %s" % (name, reason))
    for name, sub, reason in sub_skips:
        print("skipped subtest: %s / %s: %s" % (name, sub, reason))
    if skips and os.environ.get("SOFTAFF_REQUIRE_VM", "") not in ("", "0"):
        print("SOFTAFF_REQUIRE_VM=1: skipped tests count as failures")
        failed += skipped
        skipped = 0
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
