#!/usr/bin/env python3
"""Comparisons of the tprof GPU validation kit (scripts/gpu-validate.sh). Standard library only.

  compare.py kernels --summary S.json --kineto K.json[.gz] [--tprof-kineto DIR|FILE] [--warmup 5]
                     [--expect-steps N] [--tolerance-pct 2] [--min-share-pct 1] [--results R.jsonl]
                     [--prefix NAME] [--report DIR]
      tprof `summary --json` vs a Kineto (torch.profiler) trace: kernel names, counts, total GPU
      time per kernel; with --tprof-kineto (tprof's own `export --format kineto` of the same run),
      kernel counts per step over the steps after --warmup, both traces analysed by the same code.
  compare.py overhead --bare B.json --tprof T.json --kineto K.json [--max-overhead-pct 1] [--results R]
      steps/s of the three train.py runs.
  compare.py run --summary S.json [--expect-steps N] [--expect-allreduce N] [--counters]
                 [--dump-json FILE] [--results R] [--prefix NAME]
      facts of one profiled run: NVTX steps found, NCCL AllReduce calls, NVML counter samples.
  compare.py present --summary S.json --kernel SUBSTRING=COUNT... [--check NAME] [--results R]
      named kernels appear in a tprof summary with at least COUNT launches.
  compare.py selftest
      the comparison logic against synthetic traces (good and deliberately broken ones).

Kineto JSON: Chrome trace events; kernels are `ph:"X"` events with `cat == "kernel"`, `dur` in
microseconds, `args.correlation` linking them to their launch (`cat` cuda_runtime / cuda_driver,
or tprof's `record_param_comms` cpu_op for NCCL). Step ranges: `user_annotation` events named
`step` or `ProfilerStep#N`.

Kernel names: tprof's summary demangles with cpp_demangle, Kineto with the C++ runtime; names are
matched exactly after removing whitespace, and the rest by base name (no return type, parameter
list or template arguments), aggregated; the table says which.
"""

import argparse
import gzip
import json
import os
import re
import sys

try:
    import results as _results  # same directory (sys.path[0] is the script's directory)
except ImportError:  # pragma: no cover
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import results as _results

STEP_RE = re.compile(r"^(step|train_step|ProfilerStep#\d+)$")
LAUNCH_CATS = ("cuda_runtime", "cuda_driver")


# ---------------------------------------------------------------------------------------------
# loading

def load_json(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # Some Kineto versions leave a trailing comma before a closing bracket.
        return json.loads(re.sub(r",\s*([\]}])", r"\1", text))


def kineto_files(path):
    """A trace file, or every .json/.json.gz in a directory (tprof's kineto export: one per process)."""
    if os.path.isdir(path):
        out = sorted(os.path.join(path, f) for f in os.listdir(path) if f.endswith((".json", ".json.gz")))
        if not out:
            raise FileNotFoundError(f"{path}: no .json/.json.gz trace in this directory")
        return out
    return [path]


def kineto_events(path):
    """traceEvents of one file, or of every file in a directory (each event tagged with its file)."""
    events = []
    for i, f in enumerate(kineto_files(path)):
        doc = load_json(f)
        evs = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
        for e in evs:
            if isinstance(e, dict):
                if i:
                    e = dict(e)
                    e["_file"] = i
                events.append(e)
    return events


def us_to_ns(us):
    return int(round(float(us) * 1000.0))


def kineto_kernels(events):
    """name -> {count, total_ns} over `cat == "kernel"` complete events."""
    out = {}
    for e in events:
        if e.get("cat") == "kernel" and e.get("ph", "X") == "X":
            s = out.setdefault(e.get("name", ""), {"count": 0, "total_ns": 0})
            s["count"] += 1
            s["total_ns"] += us_to_ns(e.get("dur", 0))
    return out


def summary_kernels(summary):
    out = {}
    for k in summary.get("kernels", []):
        s = out.setdefault(k["name"], {"count": 0, "total_ns": 0})
        s["count"] += int(k["count"])
        s["total_ns"] += int(k["total_ns"])
    return out


# ---------------------------------------------------------------------------------------------
# names

def normalize(name):
    return re.sub(r"\s+", "", name)


def _strip_balanced_suffix(s, open_c, close_c):
    """Drop a trailing balanced `open_c ... close_c` group (e.g. a parameter list)."""
    if not s.endswith(close_c):
        return s
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        c = s[i]
        if c == close_c:
            depth += 1
        elif c == open_c:
            depth -= 1
            if depth == 0:
                return s[:i]
    return s


def _strip_templates(s):
    out, depth = [], 0
    for c in s:
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif depth == 0:
            out.append(c)
    return "".join(out)


def mangled_base_name(name):
    """The qualified name at the start of an Itanium-mangled symbol (`_ZN2ns4kernIiEEvPT_` ->
    `ns::kern`), or None. Kineto leaves some names mangled that tprof demangles."""
    m = re.match(r"_Z(N[rVKRO]*)?", name)
    if not m:
        return None
    i, parts = m.end(), []
    while i < len(name):
        if name.startswith("St", i):
            parts.append("std")
            i += 2
            continue
        d = re.match(r"\d+", name[i:])
        if not d:
            break
        n = int(d.group())
        i += len(d.group())
        parts.append(name[i:i + n])
        i += n
        if not m.group(1):  # not nested: one identifier
            break
    return "::".join(parts) if parts else None


def base_name(name):
    """`void ns::kern<T, 4>(int, T*)` -> `ns::kern`; unmangled C names are unchanged."""
    s = name.strip()
    mb = mangled_base_name(s)
    if mb:
        return mb
    s = _strip_balanced_suffix(s, "(", ")").strip()
    s = _strip_templates(s).strip()
    # A return type stays before the last space outside brackets ("void f" -> "f").
    if " " in s:
        s = s.rsplit(" ", 1)[1]
    return normalize(s)


def _merge(stats):
    out = {"count": 0, "total_ns": 0}
    for s in stats:
        out["count"] += s["count"]
        out["total_ns"] += s["total_ns"]
    return out


def match_names(a, b):
    """Pair kernel tables a (tprof) and b (Kineto).

    Returns (pairs, only_a, only_b): pairs = [(display name, a stat, b stat, level)], level
    "exact" (equal without whitespace) or "base" (equal base names, each side aggregated)."""
    na = {}
    for n, s in a.items():
        na.setdefault(normalize(n), []).append((n, s))
    nb = {}
    for n, s in b.items():
        nb.setdefault(normalize(n), []).append((n, s))
    pairs = []
    for k in sorted(set(na) & set(nb)):
        pairs.append((na[k][0][0], _merge(s for _, s in na[k]), _merge(s for _, s in nb[k]), "exact"))
    rest_a = {}
    for k in set(na) - set(nb):
        for n, s in na[k]:
            rest_a.setdefault(base_name(n), []).append((n, s))
    rest_b = {}
    for k in set(nb) - set(na):
        for n, s in nb[k]:
            rest_b.setdefault(base_name(n), []).append((n, s))
    for k in sorted(set(rest_a) & set(rest_b)):
        label = k if len(rest_a[k]) > 1 else rest_a[k][0][0]
        pairs.append((label, _merge(s for _, s in rest_a[k]), _merge(s for _, s in rest_b[k]), "base"))
    only_a = sorted(n for k in set(rest_a) - set(rest_b) for n, _ in rest_a[k])
    only_b = sorted(n for k in set(rest_b) - set(rest_a) for n, _ in rest_b[k])
    return pairs, only_a, only_b


def short(name, n=70):
    return name if len(name) <= n else name[: n - 1] + "…"


# ---------------------------------------------------------------------------------------------
# steps

def _corr(e):
    args = e.get("args") or {}
    c = args.get("correlation")
    if c is None:
        return None
    try:
        return (e.get("_file", 0), int(c))
    except (TypeError, ValueError):
        return None


def step_counts(events, warmup, step_re=STEP_RE):
    """Kernel launches per step: each kernel belongs to the step range holding its launch (the
    cuda_runtime/cuda_driver call, or record_param_comms, with the same correlation id); kernels
    whose launch is not in the trace are placed by their own start time ('fallback').

    Returns {steps, window_steps, counts: name -> launches in steps[warmup:], per_step: [kernels
    per window step], fallback: names placed by GPU time}."""
    steps = sorted(
        ((e.get("_file", 0), float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)))
         for e in events
         if e.get("ph") == "X" and e.get("cat") == "user_annotation" and step_re.match(str(e.get("name", "")))),
        key=lambda s: (s[0], s[1]),
    )
    launch_ts = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = e.get("cat")
        if cat in LAUNCH_CATS or (cat == "cpu_op" and e.get("name") == "record_param_comms"):
            c = _corr(e)
            if c is not None and c[1] != 0:
                launch_ts.setdefault(c, float(e["ts"]))
    window = steps[warmup:]
    counts, fallback = {}, set()
    per_step = [0] * len(window)
    starts = [s[1] for s in window]
    import bisect

    for e in events:
        if e.get("cat") != "kernel" or e.get("ph", "X") != "X":
            continue
        c = _corr(e)
        t = launch_ts.get(c) if c is not None else None
        if t is None:
            t = float(e["ts"])
            fallback.add(e.get("name", ""))
        f = e.get("_file", 0)
        i = bisect.bisect_right(starts, t) - 1
        if i >= 0 and window[i][0] == f and window[i][1] <= t <= window[i][2]:
            counts[e.get("name", "")] = counts.get(e.get("name", ""), 0) + 1
            per_step[i] += 1
    return {"steps": len(steps), "window_steps": len(window), "counts": counts, "per_step": per_step,
            "fallback": sorted(fallback)}


# ---------------------------------------------------------------------------------------------
# checks

class Recorder:
    def __init__(self, path, prefix="", quiet=False):
        self.path, self.prefix, self.rows, self.quiet = path, prefix, [], quiet

    def __call__(self, check, expected, measured, ok, detail=""):
        status = ok if isinstance(ok, str) else ("PASS" if ok else "FAIL")
        name = f"{self.prefix}{check}"
        row = {"check": name, "expected": str(expected), "measured": str(measured), "status": status}
        if detail:
            row["detail"] = detail
        self.rows.append(row)
        if self.path:
            _results.add(self.path, name, expected, measured, status, detail)
        if not self.quiet:
            print(f"  [{status}] {name}: expected {expected}; measured {measured}" + (f" ({detail})" if detail else ""))
        return status == "PASS"

    def ok(self):
        return all(r["status"] != "FAIL" for r in self.rows)


def compare_kernels(summary, kineto_evs, rec, tprof_kineto_evs=None, warmup=5, expect_steps=None,
                    tolerance_pct=2.0, min_share_pct=1.0, report_dir=None):
    tp = summary_kernels(summary)
    kn = kineto_kernels(kineto_evs)
    if not tp or not kn:
        rec("kernels: names", "same kernel names", f"tprof {len(tp)} names, Kineto {len(kn)} names", False,
            "a side has no kernels")
        return
    pairs, only_t, only_k = match_names(tp, kn)
    exact = sum(1 for p in pairs if p[3] == "exact")
    detail = []
    if only_t:
        detail.append("only tprof: " + "; ".join(short(n) for n in only_t[:5]) + (" ..." if len(only_t) > 5 else ""))
    if only_k:
        detail.append("only Kineto: " + "; ".join(short(n) for n in only_k[:5]) + (" ..." if len(only_k) > 5 else ""))
    rec("kernels: names", "same names (tprof summary = Kineto)",
        f"{len(pairs)} matched ({exact} exact, {len(pairs) - exact} by base name), "
        f"{len(only_t)} only tprof, {len(only_k)} only Kineto",
        not only_t and not only_k, " | ".join(detail))

    # Counts: per step when both sides have step ranges, else over the whole run.
    if tprof_kineto_evs is not None:
        st = step_counts(tprof_kineto_evs, warmup)
        sk = step_counts(kineto_evs, warmup)
        if expect_steps is not None:
            rec("steps: ranges in both traces", f"{expect_steps} steps",
                f"tprof {st['steps']}, Kineto {sk['steps']}", st["steps"] == expect_steps and sk["steps"] == expect_steps)
        if not st["window_steps"] or not sk["window_steps"]:
            rec("kernels: counts per step", f"equal over steps >= {warmup}",
                f"steps after warm-up: tprof {st['window_steps']}, Kineto {sk['window_steps']}", False,
                "no step ranges to count in")
        else:
            cpairs, _, _ = match_names({n: {"count": c, "total_ns": 0} for n, c in st["counts"].items()},
                                       {n: {"count": c, "total_ns": 0} for n, c in sk["counts"].items()})
            fb = set(st["fallback"]) | set(sk["fallback"])
            bad = []
            for name, a, b, _lvl in cpairs:
                pa, pb = a["count"] / st["window_steps"], b["count"] / sk["window_steps"]
                slack = 1 if name in fb else 0
                if abs(a["count"] - b["count"]) > slack or abs(pa - pb) > 1e-9 + slack:
                    bad.append(f"{short(name, 50)}: {pa:.2f} vs {pb:.2f}")
            unmatched = len(st["counts"]) + len(sk["counts"]) - 2 * len(cpairs)
            kps_t = sum(st["counts"].values()) / st["window_steps"]
            kps_k = sum(sk["counts"].values()) / sk["window_steps"]
            rec("kernels: counts per step", f"equal per kernel over steps >= {warmup}",
                f"kernels/step tprof {kps_t:.1f}, Kineto {kps_k:.1f}; {len(cpairs)} names, "
                f"{len(bad)} differ, {unmatched} unpaired",
                not bad and unmatched == 0 and st["window_steps"] == sk["window_steps"],
                "; ".join(bad[:5]))
    else:
        bad = [f"{short(n, 50)}: {a['count']} vs {b['count']}" for n, a, b, _ in pairs if a["count"] != b["count"]]
        rec("kernels: counts (whole run)", "equal per kernel", f"{len(pairs)} names, {len(bad)} differ",
            not bad, "; ".join(bad[:5]))

    # GPU time per kernel.
    tot_t = sum(a["total_ns"] for _, a, _, _ in pairs)
    tot_k = sum(b["total_ns"] for _, _, b, _ in pairs)
    rows = []
    for name, a, b, lvl in pairs:
        share = 100.0 * b["total_ns"] / tot_k if tot_k else 0.0
        diff = 100.0 * (a["total_ns"] - b["total_ns"]) / b["total_ns"] if b["total_ns"] else (0.0 if not a["total_ns"] else 100.0)
        rows.append({"name": name, "level": lvl, "tprof_count": a["count"], "kineto_count": b["count"],
                     "tprof_ns": a["total_ns"], "kineto_ns": b["total_ns"], "diff_pct": diff, "share_pct": share})
    rows.sort(key=lambda r: -r["kineto_ns"])
    big = [r for r in rows if r["share_pct"] >= min_share_pct]
    out_big = [r for r in big if abs(r["diff_pct"]) > tolerance_pct]
    out_all = [r for r in rows if abs(r["diff_pct"]) > tolerance_pct]
    total_diff = 100.0 * (tot_t - tot_k) / tot_k if tot_k else 0.0
    worst = max(big, key=lambda r: abs(r["diff_pct"])) if big else None
    rec("kernels: GPU time per kernel", f"within {tolerance_pct:g}% (kernels >= {min_share_pct:g}% of GPU time; total)",
        f"{len(big) - len(out_big)}/{len(big)} within; worst {worst['diff_pct']:+.2f}%; total {total_diff:+.2f}%"
        if worst else f"total {total_diff:+.2f}%",
        not out_big and abs(total_diff) <= tolerance_pct,
        (f"all kernels: {len(rows) - len(out_all)}/{len(rows)} within {tolerance_pct:g}%"
         + ("; outside: " + "; ".join(f"{short(r['name'], 50)} {r['diff_pct']:+.1f}%" for r in out_big[:5]) if out_big else "")))
    if report_dir:
        os.makedirs(report_dir, exist_ok=True)
        with open(os.path.join(report_dir, "kernels-compare.json"), "w") as f:
            json.dump({"kernels": rows, "only_tprof": only_t, "only_kineto": only_k,
                       "tprof_total_ns": tot_t, "kineto_total_ns": tot_k}, f, indent=1)
        with open(os.path.join(report_dir, "kernels-compare.md"), "w") as f:
            f.write("| kernel | match | count tprof | count Kineto | GPU µs tprof | GPU µs Kineto | diff % | share % |\n")
            f.write("|---|---|---|---|---|---|---|---|\n")
            for r in rows:
                f.write(f"| {short(r['name'], 90).replace('|', '/')} | {r['level']} | {r['tprof_count']} | "
                        f"{r['kineto_count']} | {r['tprof_ns'] / 1000:.1f} | {r['kineto_ns'] / 1000:.1f} | "
                        f"{r['diff_pct']:+.2f} | {r['share_pct']:.2f} |\n")


def compare_overhead(bare, tprof, kineto, rec, max_overhead_pct=1.0):
    b, t = bare.get("steps_per_s") or 0.0, tprof.get("steps_per_s") or 0.0
    k = (kineto or {}).get("steps_per_s") or 0.0
    if b <= 0 or t <= 0:
        rec("overhead: tprof vs bare", f"<= {max_overhead_pct:g}% slower", f"bare {b:.3f}, tprof {t:.3f} steps/s", False,
            "a run has no throughput")
        return
    ov = 100.0 * (b / t - 1.0)
    rec("overhead: tprof vs bare", f"<= {max_overhead_pct:g}% slower (steps/s)",
        f"{ov:+.2f}% (bare {b:.3f}, tprof {t:.3f} steps/s)", ov <= max_overhead_pct,
        f"median step: bare {bare.get('median_step_ms', 0):.2f} ms, tprof {tprof.get('median_step_ms', 0):.2f} ms")
    if k > 0:
        ovk = 100.0 * (b / k - 1.0)
        rec("overhead: tprof vs torch.profiler", "tprof faster than torch.profiler",
            f"tprof {ov:+.2f}%, torch.profiler {ovk:+.2f}% vs bare ({k:.3f} steps/s)", t >= k)
    else:
        rec("overhead: tprof vs torch.profiler", "tprof faster than torch.profiler", "no torch.profiler throughput", False)


def run_checks(summary, rec, expect_steps=None, expect_allreduce=None, counters=False, dump_json=None):
    if expect_steps is not None:
        ranks = summary.get("ranks", [])
        n = max((len(r.get("steps", [])) for r in ranks), default=0)
        src = ",".join(sorted({str(r.get("step_source")) for r in ranks}))
        rec("NVTX: step ranges", f"{expect_steps} steps", f"{n} steps (source {src})", n == expect_steps)
    if expect_allreduce is not None:
        n = sum(int(c.get("count", 0)) for c in summary.get("collectives", [])
                if re.sub(r"[^a-z]", "", str(c.get("op", "")).lower()) == "allreduce")
        timed = sum(int(c.get("gpu_timed", 0)) for c in summary.get("collectives", []))
        rec("NCCL: all_reduce calls", f">= {expect_allreduce} AllReduce", f"{n} AllReduce ({timed} GPU-timed)",
            n >= expect_allreduce)
    if counters:
        c = summary.get("counters") or {}
        names = c.get("names") or []
        # CounterRow: {name, rank, label, devices, samples, mean, min, max} (stat flattened).
        samples = sum(int(r.get("samples", (r.get("stat") or {}).get("samples", 0))) for r in c.get("per_rank", []))
        dumped = 0
        if dump_json:
            for f in dump_json:
                with open(f) as fh:
                    for line in fh:
                        if '"counter"' in line:
                            try:
                                dumped += json.loads(line).get("type") == "counter"
                            except json.JSONDecodeError:
                                pass
        measured = f"{len(names)} series, {samples} samples" + (f"; dump: {dumped} counter records" if dump_json else "")
        rec("NVML: counter samples", ">= 1 counter series with samples", measured,
            (bool(names) and samples > 0) or dumped > 0, ", ".join(names[:8]))


def present(summary, wants, rec, check="kernels present"):
    tp = summary_kernels(summary)
    got, bad = [], []
    for sub, need in wants:
        n = sum(s["count"] for name, s in tp.items() if sub in name)
        got.append(f"{sub} x{n}")
        if n < need:
            bad.append(sub)
    rec(check, ", ".join(f"{s} x>={n}" for s, n in wants), ", ".join(got) + f" ({len(tp)} kernel names)", not bad)


# ---------------------------------------------------------------------------------------------
# self-test on synthetic traces

def _synthetic(steps=8, warmup=2, scale=1.0, drop=None, extra=None, mangle_space=False):
    """A Kineto-like trace and the tprof summary a correct profiler would produce for it."""
    ev = []
    ts = 1000.0
    corr = 1
    kernels = [("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)", 3.2),
               ("nvjet_tst_128x256_64x4_2x1_v_bz_coopB_TNT", 41.5),
               ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 12.25)]
    summ = {}
    for s in range(steps):
        ev.append({"ph": "X", "cat": "user_annotation", "name": "step", "pid": 1, "tid": 1, "ts": ts, "dur": 500.0})
        t = ts + 10
        for name, dur in kernels:
            if drop and drop in name:
                continue
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t,
                       "dur": 4.0, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": t + 300.0, "dur": dur,
                       "args": {"correlation": corr}})
            sname = name.replace("> >", ">>") if mangle_space else name
            st = summ.setdefault(sname, {"name": sname, "count": 0, "total_ns": 0})
            st["count"] += 1
            st["total_ns"] += us_to_ns(dur * scale)
            corr += 1
            t += 20
        ts += 600.0
    if extra:
        summ[extra] = {"name": extra, "count": steps, "total_ns": 1000 * steps}
    return ev, {"kernels": list(summ.values()), "ranks": [{"steps": [{}] * steps, "step_source": "nvtx"}]}


def selftest():
    fails = []

    def expect(what, cond):
        print(f"  {'ok' if cond else 'FAILED'}: {what}")
        if not cond:
            fails.append(what)

    expect("base_name strips return type, templates, params",
           base_name("void at::native::k<4, F<float> >(int, F<float>)") == "at::native::k")
    expect("base_name of mangled names", base_name("_ZN19cutlass_cudnn_train6KernelINS_4convEEEvT_") ==
           "cutlass_cudnn_train::Kernel" and base_name("_Z4gemmPfS_S_i") == "gemm"
           and base_name("_ZNSt6vector4sizeEv") == "std::vector::size")
    expect("base_name keeps C names", base_name("nvjet_tst_128x256") == "nvjet_tst_128x256")
    expect("normalize drops whitespace", normalize("a<b<c> > (int)") == "a<b<c>>(int)")
    pairs, oa, ob = match_names({"void f<int>(int)": {"count": 1, "total_ns": 5}, "g(float, int)": {"count": 2, "total_ns": 4}},
                                {"void f<int>(int)": {"count": 1, "total_ns": 5}, "g(float,int)": {"count": 2, "total_ns": 4}})
    expect("match: exact after whitespace", len(pairs) == 2 and not oa and not ob)
    pairs, oa, ob = match_names({"void f<(anonymous namespace)::T>(int)": {"count": 1, "total_ns": 5}},
                                {"void f<{anonymous}::T>(int)": {"count": 1, "total_ns": 5}})
    expect("match: by base name when demanglers differ", len(pairs) == 1 and pairs[0][3] == "base")

    def run(ev, summ, tev=None):
        rec = Recorder(None, "selftest: ", quiet=True)
        compare_kernels(summ, ev, rec, tprof_kineto_evs=tev, warmup=2, expect_steps=8)
        return {r["check"].split(": ", 1)[1]: r["status"] for r in rec.rows}

    ev, summ = _synthetic()
    r = run(ev, summ, ev)
    expect("identical data: every check passes", r and all(s == "PASS" for s in r.values()))
    ev, summ = _synthetic(mangle_space=True)
    r = run(ev, summ, ev)
    expect("demangler spacing differences: still passes", all(s == "PASS" for s in r.values()))
    ev, summ = _synthetic(scale=1.015)
    expect("GPU time +1.5%: passes (2% tolerance)", run(ev, summ)["kernels: GPU time per kernel"] == "PASS")
    ev, summ = _synthetic(scale=1.05)
    expect("GPU time +5%: fails", run(ev, summ)["kernels: GPU time per kernel"] == "FAIL")
    ev, summ = _synthetic(extra="only_in_tprof_kernel")
    expect("a kernel only tprof saw: names fail", run(ev, summ)["kernels: names"] == "FAIL")
    ev, _ = _synthetic()
    ev2, summ2 = _synthetic(drop="nvjet")
    r = run(ev, summ2, ev2)
    expect("a kernel tprof missed: names and per-step counts fail",
           r["kernels: names"] == "FAIL" and r["kernels: counts per step"] == "FAIL")
    ev, _ = _synthetic()
    st = step_counts(ev, 2)
    expect("per-step attribution by launch correlation", st["steps"] == 8 and st["window_steps"] == 6
           and st["per_step"] == [3] * 6 and not st["fallback"])
    nolaunch = [e for e in ev if e.get("cat") != "cuda_runtime"]
    st = step_counts(nolaunch, 2)
    expect("kernels without launches are placed by GPU time", set(st["fallback"]) and st["per_step"] == [3] * 6)
    rec = Recorder(None, "selftest: ", quiet=True)
    compare_overhead({"steps_per_s": 10.0}, {"steps_per_s": 9.95}, {"steps_per_s": 8.0}, rec, 1.0)
    expect("overhead 0.5% passes, faster than torch.profiler", [x["status"] for x in rec.rows] == ["PASS", "PASS"])
    rec = Recorder(None, "selftest: ", quiet=True)
    compare_overhead({"steps_per_s": 10.0}, {"steps_per_s": 9.0}, {"steps_per_s": 9.5}, rec, 1.0)
    expect("overhead 11% fails, slower than torch.profiler", [x["status"] for x in rec.rows] == ["FAIL", "FAIL"])
    rec = Recorder(None, "selftest: ", quiet=True)
    run_checks({"ranks": [{"steps": [{}] * 30, "step_source": "nvtx"}],
                "collectives": [{"op": "AllReduce", "count": 30, "gpu_timed": 30}],
                "counters": {"names": ["gpu.sm_active_pct"], "per_rank": [{"name": "gpu.sm_active_pct", "samples": 12}]}},
               rec, expect_steps=30, expect_allreduce=30, counters=True)
    expect("run checks pass on a good summary", all(x["status"] == "PASS" for x in rec.rows) and len(rec.rows) == 3)
    rec = Recorder(None, "selftest: ", quiet=True)
    run_checks({"ranks": [], "collectives": [], "counters": {}}, rec, expect_steps=30, expect_allreduce=30, counters=True)
    expect("run checks fail on an empty summary", all(x["status"] == "FAIL" for x in rec.rows))
    print(f"selftest: {'PASS' if not fails else 'FAIL'} ({len(fails)} failed)")
    return 0 if not fails else 1


# ---------------------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("kernels")
    k.add_argument("--summary", required=True)
    k.add_argument("--kineto", required=True)
    k.add_argument("--tprof-kineto")
    k.add_argument("--warmup", type=int, default=5)
    k.add_argument("--expect-steps", type=int)
    k.add_argument("--tolerance-pct", type=float, default=2.0)
    k.add_argument("--min-share-pct", type=float, default=1.0)
    k.add_argument("--report")
    o = sub.add_parser("overhead")
    o.add_argument("--bare", required=True)
    o.add_argument("--tprof", required=True)
    o.add_argument("--kineto")
    o.add_argument("--max-overhead-pct", type=float, default=1.0)
    r = sub.add_parser("run")
    r.add_argument("--summary", required=True)
    r.add_argument("--expect-steps", type=int)
    r.add_argument("--expect-allreduce", type=int)
    r.add_argument("--counters", action="store_true")
    r.add_argument("--dump-json", action="append")
    pr = sub.add_parser("present")
    pr.add_argument("--summary", required=True)
    pr.add_argument("--kernel", action="append", required=True, help="SUBSTRING=MIN_COUNT")
    pr.add_argument("--check", default="kernels present")
    for sp in (k, o, r, pr):
        sp.add_argument("--results", help="append results here (JSON lines)")
        sp.add_argument("--prefix", default="")
    sub.add_parser("selftest")
    a = p.parse_args(argv)
    if a.cmd == "selftest":
        return selftest()
    rec = Recorder(a.results, a.prefix)
    try:
        if a.cmd == "kernels":
            compare_kernels(load_json(a.summary), kineto_events(a.kineto), rec,
                            tprof_kineto_evs=kineto_events(a.tprof_kineto) if a.tprof_kineto else None,
                            warmup=a.warmup, expect_steps=a.expect_steps, tolerance_pct=a.tolerance_pct,
                            min_share_pct=a.min_share_pct, report_dir=a.report)
        elif a.cmd == "overhead":
            compare_overhead(load_json(a.bare), load_json(a.tprof), load_json(a.kineto) if a.kineto else None, rec,
                             a.max_overhead_pct)
        elif a.cmd == "run":
            run_checks(load_json(a.summary), rec, a.expect_steps, a.expect_allreduce, a.counters, a.dump_json)
        elif a.cmd == "present":
            wants = []
            for w in a.kernel:
                sub_, _, n = w.rpartition("=")
                wants.append((sub_, int(n)) if sub_ else (w, 1))
            present(load_json(a.summary), wants, rec, a.check)
    except (OSError, ValueError, KeyError, TypeError) as e:
        rec(f"{a.cmd}: inputs", "readable inputs", f"{type(e).__name__}: {e}", False)
    return 0 if rec.ok() else 1


if __name__ == "__main__":
    sys.exit(main())
