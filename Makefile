PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench clean

$(BIN)/edgewise: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,hf,models,eval,integrations]'
	touch $@

demo: $(BIN)/edgewise
	$(BIN)/edgewise pack --query @examples/query.txt --chunks examples/chunks.json --budget 2000 --table

test: $(BIN)/edgewise
	$(BIN)/python -m pytest src tests

bench: $(BIN)/edgewise
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python benchmarks/pack.py

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
