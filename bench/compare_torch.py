#!/usr/bin/env python3
"""flashcl against PyTorch on the same CUDA device, on the same memory and the same stream.

Loads libflashcl through ctypes, opens a CUDA context, wraps the device memory of torch tensors
(flashcl_buffer_wrap_cuda) and runs on torch's current stream (flashcl_context_set_cuda_stream),
so both libraries are timed with the same CUDA events. Prints one table per operation:

  softmax:   shape, dtype, flashcl and torch ms (median), GB/s counting rows*cols*(in+out)
             bytes once, flashcl as % of a torch copy_ of the same bytes, speedup, and the
             largest |y - ref| of each library against a float64 torch reference.
  attention: torch scaled_dot_product_attention as torch chooses (cuDNN on Hopper) and with
             only its FlashAttention-2 backend, bottom-right causal (causal_lower_right, or an
             explicit mask on old torch) when Sq != Sk; TFLOP/s, flashcl's K+V GB/s (the
             decode figure), and max error against float64 on the last 128 query rows.

usage: compare_torch.py [--lib path/to/libflashcl.so] [--dtypes f32,f16,bf16] [--log]
                        [--shapes 4096x4096,...] [--variant auto|rows|chunked|split]
                        [--reps 15] [--attention]
The library path may also come from $FLASHCL_LIB; by default ./build/libflashcl.so.
"""
import argparse
import ctypes as C
import os
import statistics
import sys

# ---- ctypes mirror of include/flashcl.h and include/flashcl_cuda.h ------------------------------

FLASHCL_SUCCESS, FLASHCL_UNSUPPORTED = 0, 2
FLASHCL_BACKEND_AUTO, FLASHCL_BACKEND_OPENCL, FLASHCL_BACKEND_CUDA = 0, 1, 2
FLASHCL_F32, FLASHCL_F16, FLASHCL_BF16 = 0, 1, 2
VARIANTS = {"auto": 0, "rows": 1, "chunked": 2, "split": 3}
FLASHCL_CUDA_STREAM_LEGACY = 1  # cudaStreamLegacy: torch's default stream has handle 0


class DeviceInfo(C.Structure):
    _fields_ = [("backend", C.c_int), ("name", C.c_char * 256), ("vendor", C.c_char * 128),
                ("platform", C.c_char * 128), ("driver", C.c_char * 128),
                ("global_mem_bytes", C.c_size_t), ("local_mem_bytes", C.c_size_t),
                ("compute_units", C.c_int), ("subgroup_size", C.c_int), ("features", C.c_uint)]


class ContextOptions(C.Structure):
    _fields_ = [("backend", C.c_int), ("device_index", C.c_int), ("device_match", C.c_char_p),
                ("cache_dir", C.c_char_p)]


class Tensor(C.Structure):
    _fields_ = [("buffer", C.c_void_p), ("offset", C.c_size_t), ("dtype", C.c_int),
                ("ndim", C.c_int), ("shape", C.c_int64 * 4), ("strides", C.c_int64 * 4)]


class SoftmaxParams(C.Structure):
    _fields_ = [("scale", C.c_float), ("log", C.c_int), ("variant", C.c_int)]


class AttentionParams(C.Structure):
    _fields_ = [("scale", C.c_float), ("causal", C.c_int), ("window_left", C.c_int),
                ("window_right", C.c_int), ("softcap", C.c_float)]


def load_library(path):
    lib = C.CDLL(path)
    P = C.POINTER
    sigs = {
        "flashcl_status_string": (C.c_char_p, [C.c_int]),
        "flashcl_last_error": (C.c_char_p, []),
        "flashcl_context_create": (C.c_int, [P(ContextOptions), P(C.c_void_p)]),
        "flashcl_context_destroy": (None, [C.c_void_p]),
        "flashcl_context_device": (C.c_int, [C.c_void_p, P(DeviceInfo)]),
        "flashcl_finish": (C.c_int, [C.c_void_p]),
        "flashcl_buffer_destroy": (None, [C.c_void_p]),
        "flashcl_buffer_wrap_cuda": (C.c_int, [C.c_void_p, C.c_void_p, C.c_size_t, P(C.c_void_p)]),
        "flashcl_context_set_cuda_stream": (C.c_int, [C.c_void_p, C.c_void_p]),
        "flashcl_softmax": (C.c_int, [C.c_void_p, P(SoftmaxParams), P(Tensor), P(Tensor)]),
        "flashcl_attention_forward": (C.c_int, [C.c_void_p, P(AttentionParams), P(Tensor),
                                                P(Tensor), P(Tensor), P(Tensor), P(Tensor)]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


class Flashcl:
    """A CUDA context of libflashcl running on torch's current stream."""

    def __init__(self, lib, torch):
        self.lib, self.torch = lib, torch
        self.ctx = C.c_void_p()
        opts = ContextOptions(FLASHCL_BACKEND_CUDA, -1, None, None)
        self.check(lib.flashcl_context_create(C.byref(opts), C.byref(self.ctx)), "context_create")
        stream = torch.cuda.current_stream().cuda_stream or FLASHCL_CUDA_STREAM_LEGACY
        self.check(lib.flashcl_context_set_cuda_stream(self.ctx, C.c_void_p(stream)),
                   "context_set_cuda_stream")
        info = DeviceInfo()
        self.check(lib.flashcl_context_device(self.ctx, C.byref(info)), "context_device")
        self.device_name = info.name.decode()
        self.buffers = []

    def check(self, status, what):
        if status != FLASHCL_SUCCESS:
            raise RuntimeError("flashcl_%s: %s: %s" % (
                what, self.lib.flashcl_status_string(status).decode(),
                self.lib.flashcl_last_error().decode()))

    def tensor(self, t):
        """A flashcl_tensor over a torch tensor's memory (wrapped once per call; cheap)."""
        dtype = {self.torch.float32: FLASHCL_F32, self.torch.float16: FLASHCL_F16,
                 self.torch.bfloat16: FLASHCL_BF16}[t.dtype]
        start = t.data_ptr()
        extent = (sum((n - 1) * s for n, s in zip(t.shape, t.stride())) + 1) * t.element_size()
        buf = C.c_void_p()
        self.check(self.lib.flashcl_buffer_wrap_cuda(self.ctx, C.c_void_p(start), extent,
                                                     C.byref(buf)), "buffer_wrap_cuda")
        self.buffers.append(buf)
        ft = Tensor()
        ft.buffer, ft.offset, ft.dtype, ft.ndim = buf, 0, dtype, t.dim()
        for i, (n, s) in enumerate(zip(t.shape, t.stride())):
            ft.shape[i], ft.strides[i] = n, s
        return ft

    def release(self):
        for b in self.buffers:
            self.lib.flashcl_buffer_destroy(b)
        self.buffers = []

    def close(self):
        self.release()
        self.lib.flashcl_context_destroy(self.ctx)


def time_ms(torch, fn, reps, warmup=3):
    """Median milliseconds of fn() over reps samples; each sample repeats fn enough to last
    ~1 ms so that launch gaps do not dominate small shapes."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    inner = max(1, min(100, int(1.0 / max(start.elapsed_time(end), 1e-3))))
    samples = []
    for _ in range(reps):
        start.record()
        for _ in range(inner):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / inner)
    return statistics.median(samples)


def max_abs_error(torch, got, ref):
    diff = (got.double() - ref).abs()
    both_nan = torch.isnan(got.double()) & torch.isnan(ref)
    diff = torch.where(both_nan, torch.zeros_like(diff), diff)
    diff = torch.where(torch.isnan(diff), torch.full_like(diff, float("inf")), diff)
    return diff.max().item()


def parse_shapes(text):
    return [tuple(int(v) for v in s.lower().split("x")) for s in text.split(",") if s]


SOFTMAX_SHAPES = "32768x128,16384x1024,4096x4096,4096x32768,1024x131072,64x1048576,8x8388608"


def run_softmax(fl, torch, args):
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    params = SoftmaxParams(1.0, 1 if args.log else 0, VARIANTS[args.variant])
    op = torch.log_softmax if args.log else torch.softmax
    header = ("%-13s %-5s %9s %9s %8s %8s %8s %7s %7s %10s %10s" % (
        "shape", "dtype", "fl ms", "torch ms", "fl GB/s", "th GB/s", "copy", "fl %cp",
        "speedup", "fl maxerr", "th maxerr"))
    print("\n%s on %s (%s, variant %s)" % ("log_softmax" if args.log else "softmax",
                                            fl.device_name, "torch " + torch.__version__,
                                            args.variant))
    print(header)
    print("-" * len(header))
    failures = 0
    for rows, cols in parse_shapes(args.shapes):
        for dname in args.dtypes.split(","):
            dt = dtypes[dname]
            x = torch.randn(rows, cols, device="cuda", dtype=torch.float32).mul_(4).to(dt)
            y = torch.empty_like(x)
            fx, fy = fl.tensor(x), fl.tensor(y)

            def run_flashcl():
                fl.check(fl.lib.flashcl_softmax(fl.ctx, C.byref(params), C.byref(fx),
                                                C.byref(fy)), "softmax")

            run_flashcl()
            torch.cuda.synchronize()
            ref = op(x.double(), dim=-1)
            err_fl = max_abs_error(torch, y, ref)
            err_th = max_abs_error(torch, op(x, dim=-1), ref)
            del ref
            t_fl = time_ms(torch, run_flashcl, args.reps)
            t_th = time_ms(torch, lambda: op(x, dim=-1), args.reps)
            copy_dst = torch.empty_like(x)
            t_cp = time_ms(torch, lambda: copy_dst.copy_(x), args.reps)
            nbytes = rows * cols * (x.element_size() + y.element_size())
            gbs = lambda ms: nbytes / (ms * 1e-3) / 1e9
            # Tolerance of the f32 computation plus the output dtype's half ulp (at most 1.0).
            tol = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}[dt]
            tol *= 30.0 if args.log else 1.0
            if not err_fl <= tol:
                failures += 1
            print("%-13s %-5s %9.4f %9.4f %8.0f %8.0f %8.0f %6.1f%% %6.2fx %10.2e %10.2e%s" % (
                "%dx%d" % (rows, cols), dname, t_fl, t_th, gbs(t_fl), gbs(t_th), gbs(t_cp),
                100.0 * t_cp / t_fl, t_th / t_fl, err_fl, err_th,
                "" if err_fl <= tol else "  FAIL"))
            sys.stdout.flush()
            fl.release()
            del x, y, copy_dst
            torch.cuda.empty_cache()
    return failures


# (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, causal): FlashAttention's grid
# (D 64 and 128, S 512..16384, B*S = 16384, H = 2048 / D, both masks), then GQA prefill, chunked
# prefill (Sq < Sk, bottom-right causal) and decode.
ATTENTION_SHAPES = [(16384 // s, s, s, 2048 // d, 2048 // d, d, causal)
                    for d in (64, 128) for s in (512, 1024, 2048, 4096, 8192, 16384)
                    for causal in (0, 1)] + [
    (2, 8192, 8192, 16, 4, 128, 1), (4, 512, 4096, 32, 8, 128, 1),
    (1, 1, 65536, 32, 4, 128, 0), (8, 1, 8192, 32, 8, 128, 0), (8, 16, 16384, 32, 8, 128, 1),
]


def torch_sdpa_tools():
    """torch's backend selector and bottom-right causal bias, or (None, None) on old torch."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right
        return (lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)), causal_lower_right
    except ImportError:
        return None, None


def run_attention(fl, torch, args):
    F = torch.nn.functional
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
    flash_only, lower_right = torch_sdpa_tools()
    header = "%-28s %-5s %9s %9s %9s %8s %8s %8s %7s %8s %10s %10s" % (
        "B,Sq,Sk,Hq,Hkv,D,causal", "dtype", "fl ms", "torch ms", "FA2 ms", "fl TF/s", "th TF/s",
        "FA2 TF/s", "vs FA2", "fl GB/s", "fl maxerr", "th maxerr")
    print("\nattention on %s (torch: its default SDPA choice; FA2: the flash backend forced; "
          "GB/s: K+V bytes / time)" % fl.device_name)
    print(header)
    print("-" * len(header))
    for (b, sq, sk, hq, hkv, d, causal) in ATTENTION_SHAPES:
        for dname in args.dtypes.split(","):
            dt = dtypes[dname]
            # flashcl wants [B, S, H, D]; torch SDPA [B, H, S, D]: one allocation, two views.
            q = torch.randn(b, sq, hq, d, device="cuda", dtype=dt)
            k = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
            v = torch.randn(b, sk, hkv, d, device="cuda", dtype=dt)
            o = torch.empty_like(q)
            params = AttentionParams(0.0, causal, -1, -1, 0.0)
            fq, fk, fv, fo = (fl.tensor(t) for t in (q, k, v, o))

            def run_flashcl():
                return fl.lib.flashcl_attention_forward(fl.ctx, C.byref(params), C.byref(fq),
                                                        C.byref(fk), C.byref(fv), C.byref(fo),
                                                        None)

            status = run_flashcl()
            if status == FLASHCL_UNSUPPORTED:
                print("%-28s %-5s  unsupported: %s" % ("%d,%d,%d,%d,%d,%d,%d" % (
                    b, sq, sk, hq, hkv, d, causal), dname, fl.lib.flashcl_last_error().decode()))
                fl.release()
                return 0
            fl.check(status, "attention_forward")
            def bottom_right_mask(first_row, rows):
                """key j visible to query i iff j <= i + sk - sq (None when not causal)."""
                if not causal:
                    return None
                i = torch.arange(first_row, first_row + rows, device="cuda")[:, None]
                j = torch.arange(sk, device="cuda")[None, :]
                return j <= i + (sk - sq)

            qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
            gqa = {}
            if hq != hkv:
                try:  # torch >= 2.5 shares kv heads itself; older: materialise the repeats
                    F.scaled_dot_product_attention(qt[:1, :, :1], kt[:1, :, :1], vt[:1, :, :1],
                                                   enable_gqa=True)
                    gqa = {"enable_gqa": True}
                except TypeError:
                    kt, vt = kt.repeat_interleave(hq // hkv, 1), vt.repeat_interleave(hq // hkv, 1)
            mask = bottom_right_mask(0, sq) if sq != sk else None

            def run_torch():
                if causal and sq == sk:
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, **gqa)
                if causal and lower_right is not None:
                    return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=lower_right(sq, sk),
                                                          **gqa)
                return F.scaled_dot_product_attention(qt, kt, vt, attn_mask=mask, **gqa)

            def time_flash_backend():
                """torch with only its FlashAttention-2 backend allowed; None where it refuses."""
                if flash_only is None:
                    return None
                try:
                    with flash_only():
                        return time_ms(torch, run_torch, args.reps)
                except RuntimeError:
                    return None

            # Errors against float64 on the last (up to) 128 query rows: the full reference
            # of the large shapes would not fit in memory.
            torch.cuda.synchronize()
            rows = min(sq, 128)
            kd, vd = kt.double(), vt.double()
            if gqa:
                kd, vd = kd.repeat_interleave(hq // hkv, 1), vd.repeat_interleave(hq // hkv, 1)
            ref = F.scaled_dot_product_attention(qt[:, :, sq - rows:].double(), kd, vd,
                                                 attn_mask=bottom_right_mask(sq - rows, rows))
            ref = ref.transpose(1, 2)
            err_fl = max_abs_error(torch, o[:, sq - rows:], ref)
            err_th = max_abs_error(torch, run_torch().transpose(1, 2)[:, sq - rows:], ref)
            del ref, kd, vd
            t_fl = time_ms(torch, run_flashcl, args.reps)
            t_th = time_ms(torch, run_torch, args.reps)
            t_fa = time_flash_backend()
            visible = sq * sk if not causal else sum(
                max(0, min(sk, i + sk - sq + 1)) for i in range(sq))
            flops = 4.0 * b * hq * visible * d
            kv_bytes = 2.0 * b * sk * hkv * d * q.element_size()
            fa_ms = "%9.4f" % t_fa if t_fa else "%9s" % "-"
            fa_tf = "%8.1f" % (flops / t_fa / 1e9) if t_fa else "%8s" % "-"
            vs_fa = "%6.2fx" % (t_fa / t_fl) if t_fa else "%7s" % "-"
            print("%-28s %-5s %9.4f %9.4f %s %8.1f %8.1f %s %s %8.0f %10.2e %10.2e" % (
                "%d,%d,%d,%d,%d,%d,%d" % (b, sq, sk, hq, hkv, d, causal), dname, t_fl, t_th,
                fa_ms, flops / t_fl / 1e9, flops / t_th / 1e9, fa_tf, vs_fa,
                kv_bytes / t_fl / 1e6, err_fl, err_th))
            sys.stdout.flush()
            fl.release()
            del q, k, v, o, qt, kt, vt
            torch.cuda.empty_cache()
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.environ.get("FLASHCL_LIB", "build/libflashcl.so"),
                    help="path of libflashcl.so (default $FLASHCL_LIB or build/libflashcl.so)")
    ap.add_argument("--shapes", default=SOFTMAX_SHAPES, help="comma list of ROWSxCOLS")
    ap.add_argument("--dtypes", default="f32,f16,bf16", help="comma list of f32, f16, bf16")
    ap.add_argument("--log", action="store_true", help="log_softmax instead of softmax")
    ap.add_argument("--variant", default="auto", choices=sorted(VARIANTS))
    ap.add_argument("--reps", type=int, default=15, help="timed samples; the median is shown")
    ap.add_argument("--attention", action="store_true", help="also compare attention")
    args = ap.parse_args()

    try:
        import torch
    except ImportError:
        print("SKIP: PyTorch is not installed")
        return 77
    if not torch.cuda.is_available():
        print("SKIP: PyTorch sees no CUDA device")
        return 77
    torch.manual_seed(0)
    lib = load_library(args.lib)
    fl = Flashcl(lib, torch)
    try:
        failures = run_softmax(fl, torch, args)
        if args.attention:
            failures += run_attention(fl, torch, args)
    finally:
        fl.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
