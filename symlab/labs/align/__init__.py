"""Two mean-field posteriors matched across permutations, and the loss barrier between them (Rossi et al. 2023)."""

from symlab.lab import Lab

from . import cli, params

LAB = Lab("align", "Alignment", ":material/compare_arrows:", cli.register, params.page_params,
          tasks=params.page_tasks, presets=params.PRESETS,
          blurb=("Two mean-field posteriors from different seeds, matched across permutations: the loss barrier on the"
                 " path between them before and after alignment (Rossi et al. 2023)."))
