#!/usr/bin/env python3
"""compare.py - check retrace's replay of corpus traces against glretrace.

For each TRACE given on the command line (or every *.trace in --dir) it runs:

  * `apitrace dump` / `retrace dump` (byte equality of the two dumps) and
    `retrace info`; the features the trace uses are counted from the dump
    (glBufferStorage and its flags, glMapBufferRange access bits, instanced
    draws, UBO/SSBO bindings, compute dispatches, queries, glBegin, threads,
    contexts, the GL_VERSION string the program read);
  * `glretrace -s - --snapshot-format=MD5 TRACE` (eglretrace for EGL traces;
    needs DISPLAY) and `retrace replay -s - --snapshot-format=MD5 TRACE`, and
    compares the per-frame MD5s;
  * `retrace replay -b TRACE`, keeping every `warning:` line on stderr;
  * `glretrace --pdrawcalls "opengl: Pixels Drawn"` and the same with retrace,
    comparing the draw-call rows by call number;
  * for traces with differing frames, PNG snapshots of every frame from both
    replayers into --png (NAME-gl-<call>.png / NAME-rt-<call>.png), paired by
    frame index, so that one can look at them.

Results: RESULTS/NAME.json per trace and RESULTS/summary.md (one table row per
trace).  Run from anywhere with retrace on PATH (e.g. the project's .venv).

Usage: compare.py [--results DIR] [--png DIR] [--no-png] TRACE...
"""

import argparse
import glob
import hashlib
import json
import os
import re
import subprocess
import sys
import time

TIMEOUT = 600


def run(cmd, timeout=TIMEOUT, env=None):
    t0 = time.time()
    try:
        p = subprocess.run(
            cmd, capture_output=True, text=True, errors="replace", timeout=timeout, env=env
        )
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = "timeout"
        out = (
            (e.stdout or b"").decode("utf-8", "replace")
            if isinstance(e.stdout, bytes)
            else (e.stdout or "")
        )
        err = (
            (e.stderr or b"").decode("utf-8", "replace")
            if isinstance(e.stderr, bytes)
            else (e.stderr or "")
        )
    return rc, out, err, time.time() - t0


MD5_RE = re.compile(r"^[0-9A-Fa-f]{32}$")


def md5_lines(text):
    return [ln.strip().upper() for ln in text.splitlines() if MD5_RE.match(ln.strip())]


def drawcall_rows(text):
    """{call no: (name, value)} from the first (draw calls) table."""
    rows = {}
    frame = 0
    for line in text.splitlines():
        f = line.split("\t")
        if len(f) >= 5 and f[0] == "call":
            rows[int(f[1])] = (f[3], f[4], frame)
        elif f[0] == "frame_end":
            frame += 1
    return rows


def features(dump_text):
    feat = {}

    def count(pattern):
        return len(re.findall(pattern, dump_text, re.M))

    feat["glBufferStorage"] = count(r"\bgl(Named)?BufferStorage(EXT)?\(")
    bs_lines = re.findall(r"\bgl(?:Named)?BufferStorage(?:EXT)?\(.*", dump_text)
    feat["glBufferStorage_persistent"] = sum("GL_MAP_PERSISTENT_BIT" in line for line in bs_lines)
    feat["glBufferStorage_coherent"] = sum("GL_MAP_COHERENT_BIT" in line for line in bs_lines)
    mbr = re.findall(r"\bgl(?:Named)?MapBufferRange(?:EXT)?\(.*", dump_text)
    feat["glMapBufferRange"] = len(mbr)
    bits = {}
    for ln in mbr:
        for b in re.findall(r"GL_MAP_[A-Z_]+_BIT", ln):
            bits[b] = bits.get(b, 0) + 1
    feat["glMapBufferRange_bits"] = bits
    feat["glMapBuffer"] = count(r"\bgl(Named)?MapBuffer(ARB|OES)?\(")
    feat["memcpy"] = count(r"\bmemcpy\(")
    feat["instanced_draws"] = count(r"\bglDraw\w*Instanced\w*\(")
    feat["indirect_draws"] = count(r"\bgl(Multi)?Draw\w*Indirect\w*\(")
    feat["ubo_bindings"] = count(r"\bglBindBuffer(Base|Range)\w*\(target = GL_UNIFORM_BUFFER")
    feat["ssbo_bindings"] = count(
        r"\bglBindBuffer(Base|Range)\w*\(target = GL_SHADER_STORAGE_BUFFER"
    )
    feat["compute_dispatches"] = count(r"\bglDispatchCompute\w*\(")
    q = {}
    for t in re.findall(r"\bglBeginQuery\w*\(target = (GL_[A-Z0-9_]+)", dump_text):
        q[t] = q.get(t, 0) + 1
    feat["queries"] = q
    feat["glQueryCounter"] = count(r"\bglQueryCounter\w*\(")
    feat["glBegin"] = count(r"\bglBegin\(")
    feat["draws"] = count(
        r"\bgl(Multi)?Draw(Arrays|Elements|RangeElements|Buffers|Pixels|TransformFeedback)\w*\("
    )
    feat["fbo_binds"] = count(r"\bglBindFramebuffer\w*\(")
    feat["fence_syncs"] = count(r"\bglFenceSync\w*\(")
    feat["contexts"] = count(
        r"\b(glXCreate\w*Context\w*|eglCreateContext|wglCreate\w*Context\w*)\("
    )
    feat["shared_contexts"] = len(
        [
            ln
            for ln in re.findall(r"\b(?:glXCreate\w*Context\w*|eglCreateContext)\(.*", dump_text)
            if not re.search(
                r"(shareList|share_list|share_context) = (NULL|0x0|EGL_NO_CONTEXT)\b", ln
            )
        ]
    )
    feat["threads"] = len(set(re.findall(r"^\d+ @(\d+) ", dump_text, re.M)))
    vs = re.findall(r"glGetString\(name = GL_VERSION\) = \"([^\"]*)\"", dump_text)
    feat["gl_version"] = vs[0] if vs else None
    ctx = re.findall(r"\b(?:glXCreateContextAttribsARB|eglCreateContext)\(.*", dump_text)
    feat["context_calls"] = ctx[:4]
    return feat


def png_files(prefix):
    d, base = os.path.split(prefix)
    out = []
    for f in os.listdir(d or "."):
        if f.startswith(base) and f.endswith(".png"):
            m = re.match(re.escape(base) + r"(\d+)\.png$", f)
            if m:
                out.append((int(m.group(1)), os.path.join(d, f)))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("traces", nargs="+")
    ap.add_argument("--results", default="/work/corpus/results")
    ap.add_argument("--png", default="/work/corpus/png")
    ap.add_argument("--no-png", action="store_true")
    ap.add_argument("--no-pixels", action="store_true", help="skip the Pixels Drawn comparison")
    args = ap.parse_args()
    os.makedirs(args.results, exist_ok=True)
    os.makedirs(args.png, exist_ok=True)

    for trace in args.traces:
        name = (
            os.path.basename(trace)[: -len(".trace")]
            if trace.endswith(".trace")
            else os.path.basename(trace)
        )
        res = {"trace": trace, "name": name, "bytes": os.path.getsize(trace)}
        print(f"== {name}", file=sys.stderr, flush=True)

        rc, info, err, _ = run(["retrace", "info", trace])
        res["info_rc"] = rc
        res["info_stderr"] = err.strip().splitlines()[-5:]
        try:
            res["info"] = json.loads(info)
        except ValueError:
            res["info"] = {}
        api = res["info"].get("API", "")
        egl = "EGL" in api
        ref = "eglretrace" if egl else "glretrace"
        res["reference"] = ref

        rc, adump, err, _ = run(
            ["apitrace", "dump", "--color=never", "--thread-ids", "-v", "--multiline=false", trace]
        )
        res["features"] = features(adump)
        rc1, a, _, _ = run(["apitrace", "dump", "--color=never", trace])
        rc2, r, rerr, _ = run(["retrace", "dump", trace])
        res["dump_equal"] = (
            hashlib.md5(a.encode()).hexdigest() == hashlib.md5(r.encode()).hexdigest()
        )
        res["dump_rc"] = rc2
        if rerr.strip():
            res["dump_stderr"] = rerr.strip().splitlines()[-5:]

        # Frame MD5s
        rc, out, err, dt = run([ref, "-s", "-", "--snapshot-format=MD5", trace])
        res["ref_rc"], res["ref_secs"] = rc, round(dt, 2)
        res["ref_stderr_tail"] = err.strip().splitlines()[-8:]
        gl = md5_lines(out)
        rc, out, err, dt = run(["retrace", "replay", "-s", "-", "--snapshot-format=MD5", trace])
        res["rt_rc"], res["rt_secs"] = rc, round(dt, 2)
        res["rt_md5_stderr"] = err.strip().splitlines()[-20:]
        rt = md5_lines(out)
        res["frames_ref"], res["frames_rt"] = len(gl), len(rt)
        differ = [
            i
            for i in range(max(len(gl), len(rt)))
            if i >= len(gl) or i >= len(rt) or gl[i] != rt[i]
        ]
        res["frames_equal"] = sum(1 for i in range(min(len(gl), len(rt))) if gl[i] == rt[i])
        res["frames_differ"] = differ
        res["md5_ref"], res["md5_rt"] = gl, rt

        # Benchmark replay: warnings
        rc, out, err, dt = run(["retrace", "replay", "-b", trace])
        res["bench_rc"], res["bench_secs"] = rc, round(dt, 2)
        res["bench_out"] = (out + err).strip().splitlines()[-3:]
        res["warnings"] = [
            ln
            for ln in err.splitlines()
            if "warning" in ln.lower() or "error" in ln.lower() or "Traceback" in ln
        ]
        if rc not in (0,):
            res["bench_stderr_tail"] = err.strip().splitlines()[-15:]

        # Pixels Drawn per draw call
        if not args.no_pixels:
            rc, out, err, _ = run([ref, "--pdrawcalls", "opengl: Pixels Drawn", trace])
            gr = drawcall_rows(out)
            res["pd_ref_rc"] = rc
            res["pd_ref_stderr_tail"] = err.strip().splitlines()[-4:]
            rc, out, err, _ = run(["retrace", "--pdrawcalls", "opengl: Pixels Drawn", trace])
            rr = drawcall_rows(out)
            res["pd_rt_rc"] = rc
            res["pd_rt_stderr"] = [line for line in err.splitlines() if "pass " not in line][-10:]
            common = sorted(set(gr) & set(rr))
            res["pd_rows_ref"], res["pd_rows_rt"] = len(gr), len(rr)
            res["pd_equal"] = sum(1 for c in common if gr[c][1] == rr[c][1])
            diff = [c for c in common if gr[c][1] != rr[c][1]]
            res["pd_differ"] = len(diff)
            res["pd_differ_rows"] = [(c, gr[c][0], gr[c][1], rr[c][1]) for c in diff[:40]]
            res["pd_differ_frames"] = sorted({gr[c][2] for c in diff})
            res["pd_only_ref"] = sorted(set(gr) - set(rr))[:40]
            res["pd_only_rt"] = sorted(set(rr) - set(gr))[:40]
            res["pd_only_ref_n"] = len(set(gr) - set(rr))
            res["pd_only_rt_n"] = len(set(rr) - set(gr))

        # PNGs of differing frames
        if differ and not args.no_png:
            for f in glob.glob(os.path.join(args.png, name + "-gl-*.png")) + glob.glob(
                os.path.join(args.png, name + "-rt-*.png")
            ):
                os.remove(f)
            gp = os.path.join(args.png, name + "-gl-")
            rp = os.path.join(args.png, name + "-rt-")
            run([ref, "-s", gp, "-S", "frame", trace])
            run(["retrace", "replay", "-s", rp, "-S", "*/frame", trace])
            g, r = png_files(gp), png_files(rp)
            pairs = []
            for i in differ:
                pairs.append(
                    {
                        "frame": i,
                        "gl": g[i][1] if i < len(g) else None,
                        "rt": r[i][1] if i < len(r) else None,
                    }
                )
            res["png_pairs"] = pairs
            keep = {p["gl"] for p in pairs} | {p["rt"] for p in pairs}
            for _, f in g + r:
                if f not in keep:
                    os.remove(f)

        with open(os.path.join(args.results, name + ".json"), "w") as fh:
            json.dump(res, fh, indent=1)
        print(
            f"   frames {res['frames_equal']}/{max(len(gl), len(rt))} equal, differ {differ[:20]}; "
            f"pd equal {res.get('pd_equal')} differ {res.get('pd_differ')} "
            f"only ref {res.get('pd_only_ref_n')} only rt {res.get('pd_only_rt_n')}; "
            f"warnings {len(res['warnings'])}; dump_equal {res['dump_equal']}",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
