# Two commands do all the set-up on a fresh machine: `make demo` and `make test` (each creates .venv as needed).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXAMPLES := rag_eval/examples

.PHONY: demo test bench clean

$(STAMP): pyproject.toml setup.py rag_eval/_speedups.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## demo: evaluate the bundled example (a first-stage retriever and its reranker) with the CLI
demo: $(STAMP)
	$(BIN)/rag-eval evaluate $(EXAMPLES)/qrels.txt $(EXAMPLES)/bm25.trec $(EXAMPLES)/bm25_rerank.trec \
		-m recall@20 -m recall@5 -m precision@5 -m ndcg@5 -m mrr@5 -m judged@5

## test: the whole test suite (conformance with trec_eval, cross-checks with pytrec_eval, properties, CLI)
test: $(STAMP)
	$(BIN)/python -m pytest -q

## bench: time rag_eval against pytrec_eval, ir_measures and ranx (not a test; see benchmarks/RESULTS.md)
bench: $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/bench_metrics.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
