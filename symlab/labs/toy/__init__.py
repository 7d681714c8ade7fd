"""Exact posterior vs MFVI vs SGM on the two-weight ReLU network (Gelberg et al. §5, Fig. 4)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "toy",
    "Tractable BNN",
    ":material/hub:",
    command="symlab.cli.toy:register",
    findings="symlab.labs.toy.findings",
    params="symlab.labs.toy.params:page_params",
    presets="symlab.labs.toy.params:PRESETS",
    tasks="symlab.labs.toy.tasks:page_tasks",
    ships_defaults=False,
    results=(
        "symlab.labs.toy.config:ToyConfig",
        "symlab.labs.toy.live:LiveRun",
        "symlab.specs.animation:Animation",
        "symlab.lib.two_relu:Trajectory",
        "symlab.lib.two_relu:RunSpec",
        "symlab.lib.two_relu:ToyData",
        "symlab.lib.two_relu:TrainingSettings",
        "symlab.lib.two_relu:History",
    ),
    blurb=(
        "The two-weight ReLU network trained live: the exact posterior against mean-field VI and its "
        "symmetrised version, SGM (§5, Fig. 4, Tables 2–3)."
    ),
)
