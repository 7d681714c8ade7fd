"""The posterior modulo its symmetries, and how close equivalent modes are (Laurent et al. 2024;
Gelberg et al. 2024, Thm 3.1)."""

from symlab.specs.lab import Lab

LAB = Lab(
    "symmetry",
    "Symmetry explorer",
    ":material/flip:",
    command="symlab.cli.symmetry:register",
    findings="symlab.labs.symmetry.findings",
    params="symlab.labs.symmetry.params:page_params",
    tasks="symlab.labs.symmetry.tasks:page_tasks",
    presets="symlab.labs.symmetry.params:PRESETS",
    results=(
        "symlab.labs.symmetry.config:PerceptronConfig",
        "symlab.specs.animation:Animation",
        "symlab.labs.symmetry.experiment:PerceptronReport",
        "symlab.labs.symmetry.experiment:MassReport",
        "symlab.lib.symmetry:MinMass",
        "symlab.labs.symmetry.config:MlpConfig",
        "symlab.labs.symmetry.experiment:TrainedMlps",
        "symlab.labs.symmetry.config:QualityConfig",
        "symlab.labs.toy.config:ToyConfig",
        "symlab.labs.symmetry.experiment:QualityReport",
        "symlab.labs.symmetry.experiment:UploadedNetwork",
        "symlab.labs.symmetry.experiment:NetworkReport",
    ),
    blurb=(
        "Take the symmetries out: the doubled mode of Laurent et al.'s Fig. 1 and its removal, min-mass "
        "rescaling, how close equivalent modes are as width grows (Thm 3.1), MMD to the exact posterior, and "
        "whether units change places during training."
    ),
)
