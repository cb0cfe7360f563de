#!/usr/bin/env python3
"""Cross-checks the metric names of the alert rules and the Grafana dashboard against what
softaffd really exports.

The exposition comes from test-metrics --emit (the real formatter, daemon/metrics.c, on a test
daemon with managed, unmanaged and invalid VMs) or from a file. Checked:
  - every family in the exposition has a HELP and a TYPE line, and every sample a family;
  - every metric a rule's expr or a dashboard query names is exported (histogram and summary
    suffixes counted), or is in the allow-list (node_exporter's own metrics);
  - the labels matched on a softaff metric exist on it (or are scrape labels: instance, job),
    and a literal value of an enumerated label (status, load, state, mode) is one it takes.
Optionally (--promtool) the dashboard's queries are parsed by promtool, as recording rules with
the Grafana variables replaced.

--self-test shows the checks can fail: each softaff name the rules and dashboard use is
misspelt in turn and must be reported, and the fixtures of tests/data/metrics/ must give
exactly their expected problems.

Exit 0: no problem; 1: problems (listed); 2: usage or unreadable input."""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ALLOW = ("up", "node_textfile_mtime_seconds", "node_textfile_scrape_error")
SCRAPE_LABELS = {"instance", "job", "__name__"}
ENUM_LABELS = {"status", "load", "state", "mode"}
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}
SUFFIX_LABELS = {"_bucket": {"le"}, "": {"quantile"}}

AGGREGATORS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
               "bottomk", "topk", "quantile", "limitk", "limit_ratio"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}

IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
LABEL_MATCHER = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*')


class Problem(Exception):
    pass


# ---- the exposition ----

def parse_labels(text, pos):
    """Labels of a sample from text[pos] == '{' to the '}': ([(name, value)], end)."""
    labels, pos = [], pos + 1
    while True:
        m = re.compile(r'\s*(?:,\s*)?([A-Za-z_][A-Za-z0-9_]*)="').match(text, pos)
        if not m:
            if text.startswith("}", pos):
                return labels, pos + 1
            raise Problem(f"bad labels at {text[pos:pos + 30]!r}")
        value, pos = read_quoted(text, m.end() - 1)
        labels.append((m.group(1), value))


def read_quoted(text, pos):
    """The string starting at the quote text[pos], escapes resolved: (value, end)."""
    quote, out, i = text[pos], [], pos + 1
    while i < len(text):
        c = text[i]
        if c == "\\" and quote != "`" and i + 1 < len(text):
            out.append({"n": "\n"}.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        if c == quote:
            return "".join(out), i + 1
        out.append(c)
        i += 1
    raise Problem(f"unterminated string at {text[pos:pos + 30]!r}")


def parse_exposition(text):
    """families: name -> {type, help, samples: {sample name: {label: {values}}}}; problems."""
    families, problems = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        m = re.match(r"# (HELP|TYPE) (\S+)(?: (.*))?$", line)
        if m:
            fam = families.setdefault(m.group(2), {"type": None, "help": None, "samples": {}})
            fam[m.group(1).lower()] = m.group(3) or ""
            continue
        if not line or line.startswith("#"):
            continue
        name = IDENT.match(line).group(0)
        labels = {}
        if line.startswith("{", len(name)):
            labels = dict(parse_labels(line, len(name))[0])
        fam = family_of(families, name)
        if fam is None:
            problems.append(f"exposition line {n}: sample {name} has no HELP/TYPE family")
            continue
        seen = fam["samples"].setdefault(name, {})
        for k, v in labels.items():
            seen.setdefault(k, set()).add(v)
    for name, fam in sorted(families.items()):
        if not fam["help"]:
            problems.append(f"family {name}: no HELP line (or an empty one)")
        if fam["type"] is None:
            problems.append(f"family {name}: no TYPE line")
    return families, problems


def family_of(families, sample):
    for name, fam in families.items():
        suffixes = SUFFIXES.get(fam["type"], ("",))
        if any(sample == name + s for s in suffixes):
            return fam
    return None


def exported_names(families):
    """sample name -> {label: {values}} for every name a query may use."""
    names = {}
    for name, fam in families.items():
        for s in SUFFIXES.get(fam["type"], ("",)):
            labels = dict(fam["samples"].get(name + s, {}))
            for extra in SUFFIX_LABELS.get(s, set()) if fam["type"] in SUFFIXES else ():
                labels.setdefault(extra, set())
            names[name + s] = labels
    return names


# ---- PromQL ----

def skip_to(expr, pos, close):
    """Index after the bracket closing the one at expr[pos], strings skipped."""
    depth, opening = 0, expr[pos]
    while pos < len(expr):
        c = expr[pos]
        if c in "\"'`":
            pos = read_quoted(expr, pos)[1]
            continue
        depth += (c == opening) - (c == close)
        pos += 1
        if depth == 0:
            return pos
    raise Problem(f"unbalanced {opening!r} in {expr!r}")


def parse_matchers(expr, pos):
    """The matchers of the selector at expr[pos] == '{': ([(label, op, value)], end)."""
    out, pos = [], pos + 1
    while True:
        while pos < len(expr) and expr[pos] in " \t\n,":
            pos += 1
        if expr.startswith("}", pos):
            return out, pos + 1
        m = LABEL_MATCHER.match(expr, pos)
        if not m or pos >= len(expr) or expr[m.end()] not in "\"'`":
            raise Problem(f"cannot read the label matchers at {expr[pos:pos + 30]!r}")
        value, pos = read_quoted(expr, m.end())
        out.append((m.group(1), m.group(2), value))


def next_char(expr, pos):
    while pos < len(expr) and expr[pos].isspace():
        pos += 1
    return pos, expr[pos] if pos < len(expr) else ""


def metric_refs(expr):
    """(metric name, [(label, op, value)]) of every selector of a PromQL expression; Grafana
    variables ($x, ${x}) are skipped."""
    refs, pos = [], 0
    while pos < len(expr):
        c = expr[pos]
        if c in "\"'`":
            pos = read_quoted(expr, pos)[1]
        elif c == "[":
            pos = skip_to(expr, pos, "]")
        elif c == "#":
            nl = expr.find("\n", pos)
            pos = len(expr) if nl < 0 else nl
        elif c == "$":
            m = re.compile(r"\$(\{[^}]*\}|\w+)").match(expr, pos)
            pos = m.end() if m else pos + 1
        elif c.isdigit() or (c == "." and expr[pos + 1:pos + 2].isdigit()):
            pos = re.compile(r"[0-9A-Za-z_.]+").match(expr, pos).end()
        elif c == "{":
            matchers, pos = parse_matchers(expr, pos)
            names = [v for k, op, v in matchers if k == "__name__" and op == "="]
            refs.append((names[0] if names else None, matchers))
        elif IDENT.match(expr, pos):
            pos = identifier(expr, pos, refs)
        else:
            pos += 1
    return [(n, ms) for n, ms in refs if n is not None]


def identifier(expr, pos, refs):
    """Reads the identifier at pos: a metric selector goes to refs. Returns the end."""
    word = IDENT.match(expr, pos).group(0)
    end, c = next_char(expr, pos + len(word))
    low = word.lower()
    if low in GROUPING:
        return skip_to(expr, end, ")") if c == "(" else end
    if low in KEYWORDS or low in AGGREGATORS or c == "(":
        return pos + len(word)
    matchers = []
    if c == "{":
        matchers, end = parse_matchers(expr, end)
    else:
        end = pos + len(word)
    refs.append((word, matchers))
    return end


def check_refs(where, expr, names, allow):
    problems = []
    try:
        refs = metric_refs(expr)
    except Problem as e:
        return [f"{where}: {e}"]
    for name, matchers in refs:
        if name in names:
            problems += check_matchers(where, name, matchers, names[name])
        elif name not in allow:
            hint = "" if name.startswith("softaff_") else " (not softaff's: --allow it if meant)"
            problems.append(f"{where}: metric {name} is not exported{hint}")
    return problems


def check_matchers(where, name, matchers, labels):
    problems = []
    for label, op, value in matchers:
        if label in SCRAPE_LABELS:
            continue
        if label not in labels:
            have = ", ".join(sorted(labels)) or "none"
            problems.append(f"{where}: {name} has no label {label} (it has: {have})")
        elif (label in ENUM_LABELS and op in ("=", "!=") and "$" not in value
              and value not in labels[label]):
            have = ", ".join(sorted(labels[label]))
            problems.append(f"{where}: {name}{{{label}}} is never {value!r} (values: {have})")
    return problems


# ---- the rules (YAML without a YAML library: only expr values are needed) ----

def rule_exprs(text, path):
    """(where, expr) of every rule; the number found must equal the number of rules."""
    lines, out = text.splitlines(), []
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)(?:-\s+)?expr:\s*(.*)$", lines[i])
        i += 1
        if not m:
            continue
        indent, rest, where = len(m.group(1)), m.group(2), f"{path}:{i}"
        block = []
        while i < len(lines) and (not lines[i].strip() or
                                  len(lines[i]) - len(lines[i].lstrip()) > indent):
            block.append(lines[i])
            i += 1
        out.append((where, yaml_scalar(rest, block, where)))
    n_rules = len(re.findall(r"^\s*-\s+(?:alert|record):", text, re.M))
    if n_rules != len(out):
        raise Problem(f"{path}: {n_rules} rules but {len(out)} expr keys read")
    return out


def yaml_scalar(rest, block, where):
    if rest[:1] in "|>":
        return "\n".join(line.strip() for line in block)
    if rest.startswith('"'):
        return json.loads(rest)
    if rest.startswith("'"):
        return rest[1:-1].replace("''", "'")
    if rest.startswith(("{", "[", "&", "*", "!")):
        raise Problem(f"{where}: an expr written as {rest[:1]!r}... is not read by this check")
    plain = " ".join([rest] + [line.strip() for line in block])
    return re.sub(r"\s+#.*$", "", plain)


# ---- the dashboard ----

def dashboard_exprs(dash, path):
    """(where, expr) of every panel target and query variable, nested rows included."""
    out = []

    def panels(items):
        for p in items:
            for t in p.get("targets", []):
                if t.get("expr"):
                    out.append((f"{path}: panel {p.get('title')!r} {t.get('refId')}", t["expr"]))
            panels(p.get("panels", []))

    panels(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q or ""
        expr = variable_expr(q)
        if expr:
            out.append((f"{path}: variable {v.get('name')!r}", expr))
    if not out:
        raise Problem(f"{path}: no query found")
    return out


def variable_expr(query):
    """The PromQL inside a Grafana Prometheus variable query, or None."""
    m = re.match(r"\s*label_values\((.*),\s*\w+\s*\)\s*$", query, re.S)
    if m:
        return m.group(1)
    m = re.match(r"\s*query_result\((.*)\)\s*$", query, re.S)
    if m:
        return m.group(1)
    if re.match(r"\s*(label_values|label_names|metrics)\(", query):
        return None
    return query or None


def grafana_to_promql(expr):
    for var, value in (("$__rate_interval", "5m"), ("$__interval", "1m"), ("$__range", "1h")):
        expr = expr.replace(var, value)
    return re.sub(r"\$(\{[^}]*\}|\w+)", "x", expr)


def promtool_syntax(promtool, exprs):
    """Problems promtool finds parsing the queries (as recording rules)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "queries.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n")
            for i, (_, expr) in enumerate(exprs):
                f.write(f"      - record: q{i}\n        expr: {json.dumps(grafana_to_promql(expr))}\n")
        r = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    if r.returncode == 0:
        return []
    where = {f"q{i}": w for i, (w, _) in enumerate(exprs)}
    text = re.sub(r"\bq(\d+)\b", lambda m: where.get(m.group(0), m.group(0)), r.stdout + r.stderr)
    return [f"promtool cannot parse a dashboard query: {text.strip()}"]


# ---- running it ----

def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise Problem(f"cannot read {path}: {e.strerror}")


def exposition_text(args):
    if args.exposition:
        return read(args.exposition)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "softaff.prom")
        r = subprocess.run([args.emit, "--emit", path], capture_output=True, text=True)
        if r.returncode != 0:
            raise Problem(f"{args.emit} --emit failed ({r.returncode}): {r.stderr.strip()}")
        return read(path)


def check(expo, rules, dashboards, allow, promtool=None):
    """All problems of the exposition text, rules {path: text} and dashboards {path: text}."""
    families, problems = parse_exposition(expo)
    names = exported_names(families)
    exprs = []
    for path, text in rules.items():
        exprs += rule_exprs(text, path)
    dash_exprs = []
    for path, text in dashboards.items():
        try:
            dash_exprs += dashboard_exprs(json.loads(text), path)
        except json.JSONDecodeError as e:
            problems.append(f"{path}: not valid JSON: {e}")
    for where, expr in exprs + dash_exprs:
        problems += check_refs(where, expr, names, allow)
    if promtool and dash_exprs:
        problems += promtool_syntax(promtool, dash_exprs)
    return problems


# ---- self-test: the check must fail where it should ----

# What each fixture of tests/data/metrics/ must give: one problem per entry, naming it.
FIXTURES = {
    "misspelt-alerts.yml": ("rules", ["softaff_vm_retreat_total is not exported",
                                      "softaff_vm_info has no label stauts",
                                      "is never 'invlid'",
                                      "node_textfile_mtime_second is not exported"]),
    "misspelt-dashboard.json": ("dashboard", ["softaff_vm_burst_total is not exported",
                                              "softaff_buildinfo is not exported"]),
    "no-help.prom": ("exposition", ["family softaff_a: no HELP line",
                                    "family softaff_b: no TYPE line",
                                    "sample softaff_c has no HELP/TYPE family"]),
}


def misspell(name):
    """The name with its 10th character dropped: softaff_vm_stalled -> softaff_v_stalled."""
    return name[:9] + name[10:]


def expect(what, problems, wanted):
    """Failures (strings) unless problems are exactly one per wanted substring."""
    missing = [w for w in wanted if not any(w in p for p in problems)]
    if missing or len(problems) != len(wanted):
        return [f"{what}: wanted problems {wanted}, got {problems}"]
    return []


def self_test_misspellings(expo, rules, dashboards, allow):
    names = exported_names(parse_exposition(expo)[0])
    failures, n = [], 0
    for kind, files in (("rules", rules), ("dashboard", dashboards)):
        for path, text in files.items():
            used = sorted(set(re.findall(r"(?<![\w:])softaff_\w+", text)) & set(names))
            for name in used:
                bad = misspell(name)
                assert bad not in names, bad
                pat = re.compile(rf"(?<![\w:]){re.escape(name)}(?![\w:])")
                copy = {p: (pat.sub(bad, t) if p == path else t) for p, t in files.items()}
                args = (copy, dashboards) if kind == "rules" else (rules, copy)
                problems = check(expo, *args, allow)
                n += 1
                if not problems or not all(bad in p for p in problems):
                    failures.append(f"{path}: {name} misspelt as {bad}: got {problems}")
    return failures, n


def self_test_fixtures(fixtures, expo, allow):
    failures = []
    for name, (kind, wanted) in FIXTURES.items():
        text = read(os.path.join(fixtures, name))
        if kind == "exposition":
            problems = parse_exposition(text)[1]
        else:
            files = {name: text}
            problems = check(expo, files if kind == "rules" else {},
                             files if kind == "dashboard" else {}, allow)
        failures += expect(name, problems, wanted)
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--emit", metavar="TEST-METRICS", help="binary writing an exposition")
    src.add_argument("--exposition", metavar="FILE", help="an exposition in the text format")
    ap.add_argument("--rules", action="append", default=[], metavar="FILE")
    ap.add_argument("--dashboard", action="append", default=[], metavar="FILE")
    ap.add_argument("--allow", action="append", default=list(ALLOW), metavar="NAME",
                    help="a metric softaffd does not export that queries may use")
    ap.add_argument("--promtool", metavar="PATH", help="also parse the dashboard queries")
    ap.add_argument("--self-test", metavar="FIXTURES-DIR",
                    help="show that misspelt names are found, instead of checking")
    args = ap.parse_args()
    try:
        expo = exposition_text(args)
        rules = {p: read(p) for p in args.rules}
        dashboards = {p: read(p) for p in args.dashboard}
        if args.self_test:
            return self_test(args.self_test, expo, rules, dashboards, args.allow)
        problems = check(expo, rules, dashboards, set(args.allow), args.promtool)
    except Problem as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in problems:
        print(f"FAIL: {p}")
    n_fam = len(parse_exposition(expo)[0])
    print(f"{len(problems)} problems; {n_fam} families exported, "
          f"{len(rules)} rule files, {len(dashboards)} dashboards checked")
    return 1 if problems else 0


def self_test(fixtures, expo, rules, dashboards, allow):
    if not rules or not dashboards:
        raise Problem("--self-test needs --rules and --dashboard")
    if check(expo, rules, dashboards, set(allow)):
        raise Problem("the files given have problems already: run without --self-test")
    failures, n = self_test_misspellings(expo, rules, dashboards, set(allow))
    failures += self_test_fixtures(fixtures, expo, set(allow))
    for f in failures:
        print(f"FAIL: {f}")
    print(f"self-test: {n} misspellings and {len(FIXTURES)} fixtures, {len(failures)} failures")
    return 1 if failures or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
