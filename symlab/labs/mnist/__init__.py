"""MFVI vs SGM runs of Bayesian MLPs on MNIST, as OS processes with a registry (Gelberg et al. §5, Table 1)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "mnist",
    "MNIST",
    ":material/grid_on:",
    command="symlab.cli.mnist:register",
    findings="symlab.labs.mnist.findings",
    params="symlab.labs.mnist.params:page_params",
    blurb=(
        "Launch MFVI and SGM runs of Bayesian MLPs, watch them train, and compare accuracy across widths like"
        " the paper's Table 1 (§5)."
    ),
    runs="symlab.labs.mnist.training:KIND",
    presets="symlab.labs.mnist.params:PRESETS",
)
