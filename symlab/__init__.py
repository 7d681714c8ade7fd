"""SymLab: how weight-space symmetries break variational inference in Bayesian neural networks.

Pure computation; the Streamlit pages and the command line (``python -m symlab``) call it.
"""

__version__ = "0.1.0"
