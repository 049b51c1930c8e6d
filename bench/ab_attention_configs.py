#!/usr/bin/env python3
"""A/B of flashcl's CUDA attention kernel configurations against torch's FlashAttention-2.

For each shape of the FlashAttention grid (B = 16384/S, H = 2048/D), runs torch's flash backend
and flashcl once per configuration named (FLASHCL_CUDA_ATTENTION_CONFIG set per call; "auto" is
flashcl's own choice), alternating them `--rounds` times in one process so that clock drift
falls on every contender alike, and prints TFLOP/s (4·B·H·Sq·Sk·D, halved for causal) with the
ratio to FA2 and flashcl's largest difference from FA2's output.

usage: ab_attention_configs.py [--lib build/libflashcl.so] --configs auto,wgmma_d128pp,...
                               [--d 64,128] [--s 512,1024,...] [--causal 0,1] [--dtype f16]
                               [--rounds 2] [--reps 9]
"""
import argparse
import ctypes as C
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_torch import (AttentionParams, Flashcl, load_library, time_ms,  # noqa: E402
                           torch_sdpa_tools)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lib", default=os.environ.get("FLASHCL_LIB", "build/libflashcl.so"))
    ap.add_argument("--configs", default="auto", help="comma list: auto or configuration names")
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--s", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--dtype", default="f16", choices=["f16", "bf16"])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args()
    import torch
    F = torch.nn.functional
    flash_only, _ = torch_sdpa_tools()
    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    fl = Flashcl(load_library(args.lib), torch)
    configs = args.configs.split(",")
    print("attention A/B on %s, %s, TF/s (ratio to FA2), max |flashcl - FA2|" % (
        fl.device_name, args.dtype))
    try:
        for d in (int(x) for x in args.d.split(",")):
            for s in (int(x) for x in args.s.split(",")):
                for causal in (int(x) for x in args.causal.split(",")):
                    b, h = 16384 // s, 2048 // d
                    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=dt) for _ in range(3))
                    o = torch.empty_like(q)
                    params = AttentionParams(0.0, causal, -1, -1, 0.0)
                    fq, fk, fv, fo = (fl.tensor(t) for t in (q, k, v, o))
                    qt, kt, vt = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
                    with flash_only():
                        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal))
                    ref = ref.transpose(1, 2)

                    def run_fa():
                        with flash_only():
                            return F.scaled_dot_product_attention(qt, kt, vt,
                                                                  is_causal=bool(causal))

                    def run_config(name):
                        if name == "auto":
                            os.environ.pop("FLASHCL_CUDA_ATTENTION_CONFIG", None)
                        else:
                            os.environ["FLASHCL_CUDA_ATTENTION_CONFIG"] = name

                        def run():
                            fl.check(fl.lib.flashcl_attention_forward(
                                fl.ctx, C.byref(params), C.byref(fq), C.byref(fk), C.byref(fv),
                                C.byref(fo), None), "attention_forward (%s)" % name)
                        return run

                    flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
                    line = "B%-2d S%-5d D%-3d %s" % (b, s, d, "causal " if causal else "full   ")
                    for r in range(args.rounds):
                        fa = time_ms(torch, run_fa, args.reps)
                        line += " | FA2 %6.1f" % (flops / fa / 1e9)
                        for name in configs:
                            run = run_config(name)
                            o.fill_(float("nan"))
                            run()
                            torch.cuda.synchronize()
                            err = (o.float() - ref.float()).abs().max().item()
                            ms = time_ms(torch, run, args.reps)
                            line += " %s %6.1f (%.2fx)%s" % (name, flops / ms / 1e9, fa / ms,
                                                             "" if err < 2e-2 else
                                                             " ERR %.3g" % err)
                    os.environ.pop("FLASHCL_CUDA_ATTENTION_CONFIG", None)
                    print(line)
                    sys.stdout.flush()
                    fl.release()
                    del q, k, v, o, qt, kt, vt, ref
                    torch.cuda.empty_cache()
    finally:
        fl.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
