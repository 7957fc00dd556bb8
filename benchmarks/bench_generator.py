"""The built-in generator through the harness against xllamacpp called directly on the same prompts with the same
settings: the generator's throughput target (issue 31: at least 0.8x). Not a test; run from the repository root:

    .venv/bin/python benchmarks/bench_generator.py [--questions 10] [--seed 0] [--rounds 2]

The prompts: ``--questions`` SQuAD v1.1 dev questions (``../shared/datasets/squad-dev-v1.1``) drawn with ``--seed``,
each with its gold paragraph as the only chunk, rendered once by ``rag_eval.stages.generator.render_prompt``. One
model is loaded once and warmed by one untimed pass, before anything is timed, and serves both paths, timed in turn
(``--rounds`` times; in each round, prompt by prompt, both paths in turn, the first alternating, so that both see
the same load; wall time and the process's CPU time):

  harness   ``generate_answers(gen, {query: context}, questions=...)``, one query a call, no cache: the prompt
            rendered, the key computed, the call timed, its answer checked and kept (what a user's run does, plus
            its set-up once per question);
  direct    ``server.handle_chat_completions(request)`` on the same prompts with the same request (greedy,
            ``max_tokens``, ``stop``, no prompt cache), keeping the text only.

Both must give the same answers (greedy decoding): the script fails otherwise. Throughput is questions per second
(of wall time, and of CPU time, which the other work on a shared machine moves less); the ratio is harness / direct.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from rag_eval import Hit
from rag_eval.builtin.generator import smollm2_generator
from rag_eval.stages.generator import generate_answers, render_prompt

SQUAD = Path(__file__).resolve().parent.parent.parent / "shared" / "datasets" / "squad-dev-v1.1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    paragraphs = {}
    for line in (SQUAD / "corpus.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        paragraphs[record["_id"]] = record["text"]
    queries = [json.loads(line) for line in (SQUAD / "queries.jsonl").read_text("utf-8").splitlines()]
    picked = np.random.default_rng(args.seed).choice(len(queries), args.questions, replace=False)
    questions, contexts = {}, {}
    for i in picked.tolist():
        q = queries[i]
        questions[q["_id"]] = q["text"]
        pid = q["metadata"]["paragraph_id"]
        contexts[q["_id"]] = (Hit(pid, text=paragraphs[pid]),)
    prompts = [render_prompt(questions[q], [(h.doc_id, h.text) for h in contexts[q]]) for q in questions]
    with smollm2_generator() as gen:
        gen.open()
        server = gen._started()  # the same loaded model for both paths

        def direct(prompt: str) -> str:
            request = {"messages": [{"role": "user", "content": prompt}], "max_tokens": gen.max_tokens,
                       "temperature": 0.0, "top_k": 1, "stop": list(gen.stop), "cache_prompt": False}  # fmt: skip
            return str(server.handle_chat_completions(request)["choices"][0]["message"]["content"].strip())

        def harness(q: str) -> str:
            return str(generate_answers(gen, {q: contexts[q]}, questions={q: questions[q]})[q].text)

        for prompt in prompts:  # untimed: the model's pages read in, its buffers made
            direct(prompt)
        rows = []
        for r in range(args.rounds):
            timed = {"harness": [0.0, 0.0, []], "direct": [0.0, 0.0, []]}
            for i, (q, prompt) in enumerate(zip(questions, prompts, strict=True)):
                # per prompt, both paths in turn (which goes first alternates), so both see the same load
                calls = (("harness", harness, q), ("direct", direct, prompt))
                for name, call, given in calls if (i + r) % 2 == 0 else calls[::-1]:
                    wall, cpu = time.perf_counter(), time.process_time()
                    text = call(given)
                    timed[name][0] += time.perf_counter() - wall
                    timed[name][1] += time.process_time() - cpu
                    timed[name][2].append(text)
            if timed["harness"][2] != timed["direct"][2]:
                diff = [(a, b) for a, b in zip(timed["harness"][2], timed["direct"][2], strict=True) if a != b]
                raise SystemExit(f"round {r}: the harness and the direct calls answered differently: {diff}")
            h, d = args.questions / timed["harness"][0], args.questions / timed["direct"][0]
            hc, dc = args.questions / timed["harness"][1], args.questions / timed["direct"][1]
            rows.append((r, h, d, h / d, hc, dc, hc / dc))
    print(f"{args.questions} SQuAD questions (seed {args.seed}), gold paragraph, SmolLM2-135M by xllamacpp, 1 thread")
    print("round  harness q/s  direct q/s  ratio  harness q/CPU s  direct q/CPU s  CPU ratio")
    for r, h, d, ratio, hc, dc, cpu_ratio in rows:
        print(f"{r:>5}  {h:>11.3f}  {d:>10.3f}  {ratio:.3f}  {hc:>14.3f}  {dc:>14.3f}  {cpu_ratio:.3f}")
    print(f"median ratio {float(np.median([row[3] for row in rows])):.3f}, by CPU time "
          f"{float(np.median([row[6] for row in rows])):.3f}")  # fmt: skip


if __name__ == "__main__":
    main()
