"""SymLab: how weight-space symmetries break variational inference in Bayesian neural networks.

Layers, each importing only those below it (``[tool.importlinter]`` in pyproject.toml, checked by
tests/test_layers.py):
  cli/      the command line, ``python -m symlab`` (the pages, ``views/``, sit beside it);
  serving/  results computed once for every session, their store, shipped results, warm-up, the player;
  runs/     background training runs: registry, database, supervisor, worker, Ray, device;
  labs/     one package per lab (its config, computation and page parameters) and the registry, LABS;
  specs/    controls, URL state, results, Lab, tasks, run kinds and settings;
  lib/      the mathematics: networks, posteriors, symmetries, alignment, estimators (no I/O but files).
"""

__version__ = "0.1.0"
