#!/usr/bin/env python3
"""Results of the tprof GPU validation kit: one JSON object per line in a results file, rendered at
the end as one table (check, expected, measured, PASS/FAIL/SKIP) on stdout, in Markdown and JSON.

  results.py add --results R.jsonl --check NAME --expected TEXT --measured TEXT --status PASS|FAIL|SKIP [--detail TEXT]
  results.py tally --results R.jsonl
      prints 'PASS|FAIL|SKIP: N checks, P passed, F failed, S skipped'; exit 1 when any FAIL or none
  results.py render --results R.jsonl --out DIR [--env ENV.json] [--title TEXT]
      prints the table; writes DIR/results.md and DIR/results.json; exit 0 (1 when any FAIL)

Standard library only.
"""

import argparse
import json
import os
import sys

STATUSES = ("PASS", "FAIL", "SKIP")


def add(path, check, expected, measured, status, detail=""):
    """Append one result line (the file is created when missing)."""
    if status not in STATUSES:
        raise ValueError(f"status {status!r} is not one of {STATUSES}")
    row = {"check": check, "expected": str(expected), "measured": str(measured), "status": status}
    if detail:
        row["detail"] = str(detail)
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
    return row


def load(path):
    rows = []
    if not os.path.exists(path):
        return rows
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    rows.append({"check": "results file", "expected": "JSON lines", "measured": line[:80],
                                 "status": "FAIL"})
    return rows


def _cell(s, width):
    s = str(s).replace("\n", " ")
    return s if len(s) <= width else s[: width - 1] + "…"


def text_table(rows):
    cols = ["check", "expected", "measured", "result"]
    widths = [34, 34, 48, 6]
    body = [[_cell(r["check"], widths[0]), _cell(r["expected"], widths[1]), _cell(r["measured"], widths[2]),
             r["status"]] for r in rows]
    w = [max([len(c)] + [len(b[i]) for b in body]) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w[i]) for i, c in enumerate(cols))
    out = [line, "  ".join("-" * x for x in w)]
    for b in body:
        out.append("  ".join(b[i].ljust(w[i]) for i in range(len(cols))))
    return "\n".join(out)


def _md(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def markdown(rows, env=None, title="tprof GPU validation"):
    out = [f"# {title}", ""]
    if env:
        for k, v in env.items():
            out.append(f"- {k}: {_md(v)}")
        out.append("")
    out.append("| check | expected | measured | result |")
    out.append("|---|---|---|---|")
    for r in rows:
        out.append(f"| {_md(r['check'])} | {_md(r['expected'])} | {_md(r['measured'])} | {r['status']} |")
    details = [r for r in rows if r.get("detail")]
    if details:
        out += ["", "## Details", ""]
        for r in details:
            out.append(f"- **{_md(r['check'])}**: {_md(r['detail'])}")
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    out += ["", f"{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped.", ""]
    return "\n".join(out)


def render(results, out_dir, env_path=None, title="tprof GPU validation"):
    rows = load(results)
    env = {}
    if env_path and os.path.exists(env_path):
        with open(env_path) as f:
            env = json.load(f)
    os.makedirs(out_dir, exist_ok=True)
    counts = {s: sum(1 for r in rows if r["status"] == s) for s in STATUSES}
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(markdown(rows, env, title))
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"title": title, "environment": env, "results": rows, "counts": counts}, f, indent=1)
    print(text_table(rows))
    print(f"\n{counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped"
          f" -> {os.path.join(out_dir, 'results.md')}, results.json")
    return 1 if counts["FAIL"] else 0


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("add")
    a.add_argument("--results", required=True)
    a.add_argument("--check", required=True)
    a.add_argument("--expected", default="")
    a.add_argument("--measured", default="")
    a.add_argument("--status", required=True, choices=STATUSES)
    a.add_argument("--detail", default="")
    t = sub.add_parser("tally")
    t.add_argument("--results", required=True)
    r = sub.add_parser("render")
    r.add_argument("--results", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--env")
    r.add_argument("--title", default="tprof GPU validation")
    args = p.parse_args(argv)
    if args.cmd == "add":
        add(args.results, args.check, args.expected, args.measured, args.status, args.detail)
        return 0
    if args.cmd == "tally":
        rows = load(args.results)
        c = {st: sum(1 for x in rows if x["status"] == st) for st in STATUSES}
        status = "FAIL" if c["FAIL"] or not rows else ("PASS" if c["PASS"] else "SKIP")
        print(f"{status}: {len(rows)} checks, {c['PASS']} passed, {c['FAIL']} failed, {c['SKIP']} skipped")
        return 1 if status == "FAIL" else 0
    return render(args.results, args.out, args.env, args.title)


if __name__ == "__main__":
    sys.exit(main())
