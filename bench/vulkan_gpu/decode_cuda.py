"""The decode benchmark's eager reference and CUDA baselines on the device machine (torch there, no
executorch), over decode_models.TorchDecoder with the bench decoder's weights:

    python3 decode_cuda.py STAGED_DIR ref      # ref_logits.f32, ref_tokens.i64 for decode_runner
    python3 decode_cuda.py STAGED_DIR time [--peak-gbps 3350]

ref: the eager fp32 reference (weights dequantized to fp32, TF32 off): prefill's last logits and the
greedy tokens of every decode step. time: weights dequantized to fp16, eager and as a CUDA graph of one
decode step, timed as decode_runner.cpp times ours (prefill, then greedy decode steps, logits read back
to pick each next token).

One JSON line per engine: median ms per token, tokens/s, the fp16 weight bytes a step reads and the
bandwidth they imply, and ours' 4-bit weight bytes per token over the same time (what the same tokens/s
would mean for our layout); prefill's last logits against the fp32 reference (`ref`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import decode_models
import numpy as np
import torch


def fp16_weight_bytes(dec: decode_models.TorchDecoder) -> int:
    """What one step reads of the fp16 weights: all but the embedding table, of which one row."""
    return sum(t.numel() * t.element_size() for n, t in dec.w.items() if n != "tok.weight") + \
        dec.w["tok.weight"].shape[1] * 2


def write_reference(d: Path, meta: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = False
    cfg, prompt = meta["config"], meta["prompt"]
    dec = decode_models.TorchDecoder(decode_models.decoder_state(cfg), cfg, torch.float32, "cuda")
    tokens = decode_models.prompt_tokens(cfg["vocab"], prompt).reshape(1, -1).cuda()
    with torch.no_grad():
        logits = dec(tokens, torch.arange(prompt, device="cuda"))[0, -1]
        logits.cpu().numpy().tofile(d / "ref_logits.f32")
        generated = []
        for s in range(meta["steps"]):
            generated.append(int(torch.argmax(logits)))
            logits = dec(torch.tensor([[generated[-1]]], device="cuda"), torch.tensor([prompt + s], device="cuda"))[0, -1]
    np.array(generated, dtype=np.int64).tofile(d / "ref_tokens.i64")
    print(json.dumps({"engine": "eager-cuda fp32 reference", "tokens": generated}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("staged")
    ap.add_argument("what", choices=["ref", "time"])
    ap.add_argument("--peak-gbps", type=float, default=3350)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    d = Path(args.staged)
    meta = json.loads((d / "decode.json").read_text())
    if args.what == "ref":
        write_reference(d, meta)
        return
    cfg, prompt, steps = meta["config"], meta["prompt"], meta["steps"]
    ref = torch.from_numpy(np.fromfile(d / "ref_logits.f32", dtype=np.float32))
    dec = decode_models.TorchDecoder(decode_models.decoder_state(cfg), cfg, torch.float16, "cuda")
    wbytes = fp16_weight_bytes(dec)
    tokens0 = decode_models.prompt_tokens(cfg["vocab"], prompt).reshape(1, -1).cuda()
    pos0 = torch.arange(prompt, device="cuda")

    # CUDA graph of one decode step over static inputs (its index_copy_ writes the cache in place)
    tok_s, pos_s = torch.zeros(1, 1, dtype=torch.int64, device="cuda"), torch.zeros(1, dtype=torch.int64, device="cuda")
    with torch.no_grad():
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(2):
                dec(tok_s, pos_s)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            logits_s = dec(tok_s, pos_s)

    def eager_step(tok: int, pos: int) -> torch.Tensor:
        return dec(torch.tensor([[tok]], device="cuda"), torch.tensor([pos], device="cuda"))[0, -1].float().cpu()

    def graph_step(tok: int, pos: int) -> torch.Tensor:
        tok_s.fill_(tok)
        pos_s.fill_(pos)
        graph.replay()
        return logits_s[0, -1].float().cpu()

    for engine, step in (("eager-cuda", eager_step), ("cuda-graph", graph_step)):
        ms, generated = [], []
        with torch.no_grad():
            for r in range(args.rounds):
                for kc, vc in dec.cache:
                    kc.zero_()
                    vc.zero_()
                logits = dec(tokens0, pos0)[0, -1].float().cpu()
                if r == 0:
                    err = ((logits - ref).abs().max() / ref.abs().max()).item()
                for s in range(steps):
                    tok = int(torch.argmax(logits))
                    generated.append(tok)
                    torch.cuda.synchronize()
                    t0 = time.perf_counter()
                    logits = step(tok, prompt + s)
                    ms.append((time.perf_counter() - t0) * 1e3)
        med = statistics.median(ms)
        print(json.dumps({"engine": engine, "weights": "fp16 (dequantized)", "median_ms_per_token": round(med, 4),
                          "min_ms": round(min(ms), 4), "tokens_per_s": round(1000 / med, 1),
                          "weight_bytes_per_token": wbytes, "weight_gbps": round(wbytes / med / 1e6, 1),
                          "bandwidth_fraction": round(wbytes / med / 1e6 / args.peak_gbps, 4),
                          "int4_bytes_gbps": round(meta["weight_bytes_per_token"] / med / 1e6, 1),
                          "prefill_max_rel_err": err, "first_tokens": generated[:8],
                          "device": torch.cuda.get_device_name(), "torch": torch.__version__}), flush=True)


if __name__ == "__main__":
    main()
