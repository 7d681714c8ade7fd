"""A single Gaussian fitted by reverse KL to two modes (Gelberg et al. §3)."""

from symlab.lab import Lab

from . import cli, params

LAB = Lab("modes", "Mode interpolation", ":material/ssid_chart:", cli.register, params.page_params,
          presets=params.PRESETS,
          blurb=("One Gaussian, two modes, and the threshold α* ≈ 5σ where reverse KL stops interpolating (Gelberg et "
                 "al. 2024, §3)."))
