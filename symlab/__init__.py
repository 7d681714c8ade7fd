"""SymLab: how weight-space symmetries break variational inference in Bayesian neural networks.

Its layers import only downwards; CONTRIBUTING.md (Layers) has the map, and ``[tool.importlinter]`` in
pyproject.toml the contract tests/test_layers.py holds.
"""

__version__ = "0.1.0"
