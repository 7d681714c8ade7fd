"""MFVI vs SGM runs of Bayesian MLPs on MNIST, as OS processes with a registry (Gelberg et al. §5, Table 1)."""

from symlab.lab import Lab

from . import cli, params

LAB = Lab(
    name="mnist",
    title="MNIST",
    icon=":material/grid_on:",
    blurb=("Launch MFVI and SGM runs of Bayesian MLPs, watch them train, and compare accuracy across widths like the paper's Table 1 (§5)."),
    page="pages/mnist.py",
    register=cli.register,
    page_params=params.page_params,
)
