#!/usr/bin/env python3
"""The vendor baseline for flashcl-bench: torch.softmax on CUDA, measured the same way.

Same shapes and dtypes as `flashcl-bench softmax`, same accounting: median time per call over
batches timed with CUDA events after a warm-up; GB/s counts rows*cols*(in+out) bytes once;
% of torch's own device copy bandwidth (y.copy_(x) on a large tensor, read + write counted);
inputs and outputs rotated through buffer sets larger than the cache, as flashcl-bench does, so
a cache larger than one problem does not flatter it: each call writes its set's preallocated
output (torch.softmax(x, dim=-1, out=y)). --reuse-output writes one output, as
`flashcl-bench softmax --reuse-output`. The "alloc ms" column is torch.softmax allocating its
output, as user code calls it: the caching allocator hands back the block the previous call
freed, so that output stays in the L2 when it fits (32768x128 f32: 16 MiB), which neither
rotated measurement allows.

    python3 bench/torch_softmax.py --suite full --json torch.json
"""
import argparse
import datetime
import json
import math
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("torch_softmax.py: needs PyTorch (python3 -m pip install torch)")

DEFAULT_SHAPES = [(4096, 1024), (1024, 4096), (64, 65536)]
FULL_SHAPES = [(32768, 128), (16384, 1024), (4096, 4096), (4096, 32768),
               (1024, 131072), (64, 1048576), (8, 8388608)]
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
MIB = 1 << 20
TARGET_BATCH_S = 0.003  # as flashcl-bench: long enough that launch overhead vanishes
MAX_SETS = 8
# torch.cuda.OutOfMemoryError exists from torch 1.13; older versions raise a RuntimeError.
OOM_ERROR = getattr(torch.cuda, "OutOfMemoryError", MemoryError)


def parse_shapes(text):
    shapes = []
    for item in text.split(","):
        rows, sep, cols = item.lower().partition("x")
        if not sep or not rows.isdigit() or not cols.isdigit() or int(rows) < 1 or int(cols) < 1:
            raise argparse.ArgumentTypeError(
                f"bad shape '{item}': expected ROWSxCOLS, e.g. 4096x1024")
        shapes.append((int(rows), int(cols)))
    return shapes


def parse_dtypes(text):
    names = text.split(",")
    for n in names:
        if n not in DTYPES:
            raise argparse.ArgumentTypeError(f"bad dtype '{n}': expected f32, f16, bf16")
    return list(dict.fromkeys(names))


def time_ms(fn, reps, warmup=1):
    """Median ms per call of fn(i) over `reps` batches, each sized to ~TARGET_BATCH_S."""
    for i in range(warmup):
        fn(i)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    batch, it = 1, warmup
    for _ in range(2):  # the first guess is dominated by launch latency; refine once
        start.record()
        for _ in range(batch):
            fn(it)
            it += 1
        end.record()
        end.synchronize()
        per = max(start.elapsed_time(end) / batch, 1e-4)
        want = min(100000, max(1, math.ceil(TARGET_BATCH_S * 1e3 / per)))
        if want <= batch:
            break
        batch = want
    times = []
    for _ in range(reps):
        start.record()
        for _ in range(batch):
            fn(it)
            it += 1
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / batch)
    times.sort()
    mid = len(times) // 2
    median = times[mid] if len(times) % 2 else 0.5 * (times[mid - 1] + times[mid])
    return median, batch


def copy_bandwidth(device, reps):
    """torch's own ceiling: a device-to-device copy of a tensor far larger than L2."""
    free, _ = torch.cuda.mem_get_info(device)
    nbytes = min(512 * MIB, free // 8)
    x = torch.empty(nbytes // 4, dtype=torch.float32, device=device).uniform_(-1, 1)
    y = torch.empty_like(x)
    ms, _ = time_ms(lambda i: y.copy_(x), reps, warmup=2)
    del x, y
    return 2 * nbytes / (ms * 1e-3) / 1e9, nbytes


def softmax_into(log, device):
    """fn(x, y) computing (log_)softmax of x over its last dimension into y: the out= form of
    torch.softmax where this torch has it, else aten's _softmax.out (the same kernel)."""
    op = torch.log_softmax if log else torch.softmax
    aten = torch.ops.aten._log_softmax if log else torch.ops.aten._softmax
    try:
        probe = torch.zeros(1, 2, device=device)
        op(probe, dim=-1, out=torch.empty_like(probe))
        return lambda x, y: op(x, dim=-1, out=y)
    except (TypeError, RuntimeError):
        return lambda x, y: aten.out(x, -1, False, out=y)


def bench_one(rows, cols, dtype, log, reps, l2_bytes, device, reuse_output):
    op = torch.log_softmax if log else torch.softmax
    into = softmax_into(log, device)
    esz = torch.tensor([], dtype=dtype).element_size()
    pair = 2 * rows * cols * esz
    target = max(4 * l2_bytes, 256 * MIB)  # the same rule as flashcl-bench
    sets = max(1, min(MAX_SETS, math.ceil(target / pair)))
    xs = []
    for _ in range(sets):
        x = torch.empty(rows, cols, dtype=torch.float32, device=device).uniform_(-8, 8)
        xs.append(x.to(dtype))
        del x
    ys = [torch.empty_like(xs[0]) for _ in range(1 if reuse_output else sets)]
    ms, batch = time_ms(lambda i: into(xs[i % sets], ys[i % len(ys)]), reps, warmup=sets)
    del ys
    # torch.softmax allocating its output: what a user's code pays, output reused hot.
    alloc_ms, _ = time_ms(lambda i: op(xs[i % sets], dim=-1), reps, warmup=sets)
    return ms, alloc_ms, batch, sets, pair


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shapes", type=parse_shapes, help="ROWSxCOLS,... (default: the suite's)")
    ap.add_argument("--dtype", type=parse_dtypes, help="f32,f16,bf16 (default: suite's)")
    ap.add_argument("--suite", choices=["default", "full"], default="default")
    ap.add_argument("--log", action="store_true", help="log_softmax instead of softmax")
    ap.add_argument("--reps", type=int, default=7, help="timed batches, median reported")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda)")
    ap.add_argument("--reuse-output", action="store_true",
                    help="every call writes one output buffer (as flashcl-bench --reuse-output)")
    ap.add_argument("--json", metavar="FILE", help="also write results as JSON")
    args = ap.parse_args()
    if not 1 <= args.reps <= 1000:
        ap.error("--reps must be from 1 to 1000")
    if not torch.cuda.is_available():
        print("torch_softmax.py: no CUDA device visible to torch", file=sys.stderr)
        return 1

    full = args.suite == "full"
    shapes = args.shapes or (FULL_SHAPES if full else DEFAULT_SHAPES)
    dtypes = args.dtype or (["f32", "f16", "bf16"] if full else ["f32", "f16"])
    device = torch.device(args.device)
    props = torch.cuda.get_device_properties(device)
    l2_bytes = getattr(props, "L2_cache_size", 64 * MIB)

    copy_gbps, copy_bytes = copy_bandwidth(device, args.reps)
    print(f"== {props.name} (torch {torch.__version__}, CUDA {torch.version.cuda})")
    print(f"   copy bandwidth: {copy_gbps:.1f} GB/s (y.copy_(x), 2 x {copy_bytes // MIB} MiB, "
          "read + write counted)")
    print(f"   torch.{'log_softmax' if args.log else 'softmax'}(x, dim=-1), uniform [-8, 8] "
          f"inputs; median of {args.reps} batches")
    print("   buffers: inputs rotate through sets larger than the cache; outputs "
          + ("one buffer for every call (--reuse-output)" if args.reuse_output
             else "rotate with them (out=)")
          + ";\n   alloc ms: torch.softmax allocating its output, as user code calls it\n")
    print(f"{'shape':<15} {'dtype':<5} {'ms':>10} {'GB/s':>8} {'%copy':>6} {'alloc ms':>10}")

    results, failed = [], False
    for rows, cols in shapes:
        for name in dtypes:
            shape = f"{rows}x{cols}"
            row = {"rows": rows, "cols": cols, "dtype": name}
            try:
                ms, alloc_ms, batch, sets, pair = bench_one(
                    rows, cols, DTYPES[name], args.log, args.reps, l2_bytes, device,
                    args.reuse_output)
                gbps = pair / (ms * 1e-3) / 1e9
                row.update(status="ok", ms=ms, gbps=gbps, pct_copy=100 * gbps / copy_gbps,
                           alloc_ms=alloc_ms, batch=batch, reps=args.reps, buffer_sets=sets)
                print(f"{shape:<15} {name:<5} {ms:>10.4f} {gbps:>8.1f} "
                      f"{100 * gbps / copy_gbps:>5.1f}% {alloc_ms:>10.4f}", flush=True)
            except (OOM_ERROR, RuntimeError) as e:  # report the row, keep going
                if isinstance(e, OOM_ERROR) or "out of memory" in str(e):
                    row.update(status="out_of_memory")
                    print(f"{shape:<15} {name:<5} out of memory", flush=True)
                else:
                    failed = True
                    row.update(status="error", note=str(e).splitlines()[0])
                    print(f"{shape:<15} {name:<5} error: {row['note']}", flush=True)
            torch.cuda.empty_cache()
            results.append(row)

    if args.json:
        report = {
            "tool": "torch_softmax.py",
            "benchmark": "log_softmax" if args.log else "softmax",
            "suite": args.suite,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command_line": " ".join([sys.executable] + sys.argv),
            "reps": args.reps,
            "reuse_output": args.reuse_output,
            "devices": [{
                "name": props.name,
                "backend": "torch-cuda",
                "torch_version": torch.__version__,
                "cuda_version": torch.version.cuda,
                "compute_units": props.multi_processor_count,
                "global_mem_bytes": props.total_memory,
                "copy_gbps": copy_gbps,
                "copy_buffer_bytes": copy_bytes,
                "results": results,
            }],
        }
        tmp = args.json + ".tmp"
        with open(tmp, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
        os.replace(tmp, args.json)  # never leave half a report behind
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
