"""Two mean-field posteriors matched across permutations, and the loss barrier between them (Rossi et al. 2023)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "align",
    "Alignment",
    ":material/compare_arrows:",
    command="symlab.cli.align:register",
    findings="symlab.labs.align.findings",
    params="symlab.labs.align.params:page_params",
    tasks="symlab.labs.align.tasks:page_tasks",
    presets="symlab.labs.align.params:PRESETS",
    results=(
        "symlab.labs.align.config:AlignConfig",
        "symlab.labs.align.experiment:PosteriorPair",
        "symlab.labs.align.experiment:AlignmentReport",
        "symlab.labs.align.experiment:PathMaps",
        "symlab.lib.gaussian:DiagonalGaussian",
        "symlab.lib.layout:Layout",
        "symlab.lib.align:Alignment",
        "symlab.labs.align.experiment:UploadedPair",
        "symlab.labs.align.experiment:NetworkAlignment",
        "symlab.labs.align.experiment:AssignmentView",
        "symlab.specs.surfaces:Surface",
        "symlab.specs.surfaces:Line",
    ),
    blurb=(
        "Two mean-field posteriors from different seeds, matched across permutations: the loss barrier on the"
        " path between them before and after alignment (Rossi et al. 2023)."
    ),
)
