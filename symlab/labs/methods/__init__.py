"""Posterior approximations against a reference posterior of checkpoints (Laurent et al. 2024, §4, Table 1)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "methods",
    "Posterior approximations",
    ":material/leaderboard:",
    command="symlab.cli.methods:register",
    findings="symlab.labs.methods.findings",
    params="symlab.labs.methods.params:page_params",
    presets="symlab.labs.methods.params:PRESETS",
    runs="symlab.labs.methods.training:KIND",
    blurb=(
        "Which approximation gets closest to the posterior? MC dropout, MFVI, SWAG, Laplace, SGHMC and deep "
        "ensembles, one mode and ten, scored by MMD to a reference of independently trained checkpoints "
        "(Laurent et al. 2024, §4)."
    ),
)
