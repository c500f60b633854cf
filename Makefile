# The README's two commands: `make book` (the main job) and `make test` (the test suite).
# Both install what they need first. Runs are offline and at smoke scale unless told otherwise.
PYTHON ?= python3
# The torch to install where none is (Colab and other machines keep theirs).
TORCH ?= torch==2.13.0
GPT1_SCALE ?= smoke
export GPT1_SCALE
export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1
# The released GPT-1 vocabulary, where a local copy sits beside the checkout (chapter 1 shows it).
export GPT1_BPE_DIR ?= $(abspath $(wildcard ../shared/data/gpt1_bpe))

.PHONY: install book test lint format clean record

install:
	@$(PYTHON) -c "import torch" 2>/dev/null || $(PYTHON) -m pip install -q "$(TORCH)"
	$(PYTHON) -m pip install -q -e ".[book,test,exact]"
	$(PYTHON) -m ipykernel install --prefix $(KERNEL) --name python3 >/dev/null

# The notebooks run on a kernel of the $(PYTHON) the package was installed into, whatever
# `python3` kernel a machine has elsewhere (JUPYTER_PATH is searched first).
KERNEL := $(CURDIR)/_build/kernel
export JUPYTER_PATH := $(KERNEL)/share/jupyter$(if $(JUPYTER_PATH),:$(JUPYTER_PATH))

# Every tool runs through $(PYTHON), never a script found on a path: where the package was
# already installed (a venv with system site packages, `pip install --user`, a conda base),
# pip puts no script beside the interpreter (issue 45).
JUPYTER_BOOK = $(PYTHON) -c 'from jupyter_book.cli.main import main; main(prog_name="jupyter-book")'
# The book's folder (tests build a small one this way).
BOOK ?= .

# Execute every chapter at $(GPT1_SCALE) and render the HTML book into _build/html; then check
# the pages for progress bars, warnings and machine paths (tools/check_pages.py).
book: install
	$(JUPYTER_BOOK) build $(BOOK) -W --keep-going
	$(PYTHON) tools/check_pages.py $(BOOK)/_build/html

# Lint (ruff and tools/architecture.py), then the unit tests and every chapter through nbmake,
# in one pytest run.
test: install lint
	$(PYTHON) -m pytest --nbmake --nbmake-timeout=1200 tests book

# The recorded reproduction (a GPU run): every chapter's experiments at SCALE in one process
# (gpt1lib.harness.runner), on the data in DATA, records into results/<SCALE>/, then the book.
# It prints its units and their predicted minutes first; run again, it goes on with the units
# not done (FORCE=1 starts over). With BUDGET=<minutes>: it stops before a unit that would not
# finish in that time, nothing is installed (a machine without a network) and the book is
# built afterwards, on any machine, with `make book`. DATA may be a bundle (python -m
# gpt1lib.harness.bundle), which is then the corpus too.
SCALE ?= small
DATA ?= ../shared/data
CORPUS ?= $(if $(wildcard $(DATA)/manifest.json),$(DATA),$(DATA)/corpus/gutenberg_novels)
FORCE ?=
BUDGET ?=
record: $(if $(BUDGET),,install)
	$(PYTHON) -m gpt1lib.harness.reproduce --scale $(SCALE) --source $(abspath $(DATA)) \
		--corpus $(abspath $(CORPUS)) $(if $(FORCE),--force) \
		$(if $(BUDGET),--stop-after $(BUDGET),--book)

# ruff, then the library's layers, sizes and the chapters' shared code (tools/architecture.py).
lint:
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	$(PYTHON) tools/architecture.py

format:
	$(PYTHON) -m ruff format .
	$(PYTHON) -m ruff check --fix .

clean:
	rm -rf _build .pytest_cache
