"""A single Gaussian fitted by reverse KL to two modes (Gelberg et al. §3)."""

from symlab.lab import Lab

from . import cli, params

LAB = Lab(
    name="modes",
    title="Mode interpolation",
    icon=":material/ssid_chart:",
    blurb=("One Gaussian, two modes, and the threshold α* ≈ 5σ where reverse KL stops interpolating (Gelberg et al. 2024, §3)."),
    page="pages/modes.py",
    register=cli.register,
    page_params=params.page_params,
)
