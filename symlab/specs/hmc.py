"""Full-batch HMC's settings (:mod:`symlab.lib.hmc`), declared once for every lab that runs it as a reference
posterior: the command line's flags and the checks derive from these declarations. Torch-free; the sampler's own
settings are built when a computation runs."""

from __future__ import annotations

from dataclasses import dataclass

from symlab.specs import controls
from symlab.specs.controls import control


@dataclass(frozen=True)
class HmcConfig:
    """Chains, warm-up, draws and the integrator's time. The defaults suit a posterior of a few parameters: the
    tractable BNN's two, sampled in a few seconds."""

    hmc_chains: int = control(
        16,
        low=1,
        high=256,
        label="HMC chains",
        help="HMC chains, run as one batched computation, each from its own start.",
    )
    hmc_warmup: int = control(
        500,
        low=0,
        high=100_000,
        label="HMC warm-up",
        help="HMC warm-up transitions per chain (step size and mass matrix tuned, then frozen; not kept).",
    )
    hmc_samples: int = control(
        1000, low=4, high=100_000, label="HMC draws", help="HMC draws kept per chain after warm-up."
    )
    hmc_trajectory: float = control(
        1.0,
        low=0.01,
        high=100.0,
        label="HMC trajectory length",
        help="HMC trajectory length τ = L·ε: each transition takes ⌈τ/ε⌉ leapfrog steps.",
    )
    hmc_target_accept: float = control(
        0.8,
        low=0.5,
        high=0.99,
        label="HMC target acceptance",
        help="HMC step size tuned so that the mean acceptance probability approaches this.",
    )

    def validate(self) -> HmcConfig:
        return controls.validate(self)

    def settings(self, max_leapfrog: int | None = None):
        """The sampler's settings (:class:`symlab.lib.hmc.HmcSettings`), with a lab's cap on leapfrog steps if given;
        loads torch."""
        from symlab.lib.hmc import HmcSettings

        return HmcSettings(
            warmup=self.hmc_warmup,
            samples=self.hmc_samples,
            trajectory_length=self.hmc_trajectory,
            target_accept=self.hmc_target_accept,
            max_leapfrog=HmcSettings.max_leapfrog if max_leapfrog is None else max_leapfrog,
        )
