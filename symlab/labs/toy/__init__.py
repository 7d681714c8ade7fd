"""Exact posterior vs MFVI vs SGM on the two-weight ReLU network (Gelberg et al. §5, Fig. 4)."""

from symlab.lab import Lab

from . import cli, params

LAB = Lab("toy", "Tractable BNN", ":material/hub:", cli.register, params.page_params,
          presets=params.PRESETS,
          blurb=("The two-weight ReLU network trained live: the exact posterior against mean-field VI and its "
                 "symmetrised version, SGM (§5, Fig. 4, Tables 2–3)."))
