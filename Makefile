# Two commands on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test system-deps clean

install: $(STAMP)

# OCR is a system package; install it only when it is missing (CI runs as root).
system-deps:
	@command -v tesseract >/dev/null 2>&1 || { \
		echo "installing tesseract-ocr (apt-get)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq tesseract-ocr tesseract-ocr-eng >/dev/null; }

$(STAMP): pyproject.toml | system-deps
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, from its pinned CPU wheel, so nothing resolves to a CUDA build.
	$(BIN)/python -m pip install -q "torch==2.13.0"
	$(BIN)/python -m pip install -q -e ".[test]"
	touch $(STAMP)

run: install
	$(BIN)/groundwork serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/python -m pytest -q tests

clean:
	rm -rf $(VENV) .groundwork .pytest_cache
