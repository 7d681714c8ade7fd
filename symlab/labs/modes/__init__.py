"""A single Gaussian fitted by reverse KL to two modes (Gelberg et al. §3)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "modes",
    "Mode interpolation",
    ":material/ssid_chart:",
    command="symlab.cli.modes:register",
    findings="symlab.labs.modes.findings",
    params="symlab.labs.modes.params:page_params",
    presets="symlab.labs.modes.params:PRESETS",
    results=(
        "symlab.labs.modes.frames:PathRun",
        "symlab.labs.modes.experiment:OptimisationPath",
        "symlab.specs.animation:Animation",
    ),
    blurb=(
        "One Gaussian, two modes, and the threshold α* ≈ 5σ where reverse KL stops interpolating (Gelberg et "
        "al. 2024, §3)."
    ),
)
