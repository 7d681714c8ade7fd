"""The align lab on the command line: ``python -m symlab align ...``."""

from __future__ import annotations

from symlab import cli, controls, results
from symlab.labs.align import experiment as align_lab


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "align", help="align two MFVI posteriors across permutations (W2) and compare the loss barrier",
        description="Train two mean-field posteriors of the same ReLU MLP from different seeds, align the second "
                    "to the first by per-layer permutations minimising the 2-Wasserstein distance (coordinate "
                    "descent, one linear assignment per layer; weight matching on the means for comparison), and "
                    "report the marginal predictive's test loss along the interpolation of means and standard "
                    "deviations, before and after (Rossi et al. 2023).")
    controls.add_flags(p, align_lab.AlignConfig)
    p.add_argument("--data-dir", default=None, help="MNIST directory (default: the copy shipped in assets/mnist)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(run=_run_align, format=_format_align)

def _run_align(args) -> dict:
    config = controls.from_args(align_lab.AlignConfig, args)
    mnist = cli.load_mnist(args.data_dir) if config.task == "mnist" else None
    progress = cli.stderr_progress(args, "Adam step")

    tenths_shown = set()

    def by_tenths(done, total, *_elbo):
        if done * 10 // total not in tenths_shown:
            tenths_shown.add(done * 10 // total)
            progress(done, total)

    return results.to_json(align_lab.run(config, mnist, by_tenths))

def _format_align(report: dict) -> str:
    c = report["config"]
    sizes = "-".join(map(str, report["sizes"]))
    lines = [f"{c['task']}: two MFVI posteriors of a {sizes} MLP, {c['steps']} Adam steps "
             f"({report['train_seconds']:.1f} s); test loss {report['loss_a']:.3f} / {report['loss_b']:.3f}, "
             f"accuracy {report['accuracy_a']:.3f} / {report['accuracy_b']:.3f}",
             f"alignment: {report['sweeps']} sweep(s), {'converged' if report['converged'] else 'not converged'}, "
             f"{report['align_seconds'] * 1000:.0f} ms for both objectives",
             f"{'path':>26} {'W2 distance':>12} {'|mu_A - mu_B|':>14} {'loss barrier':>13} {'acc. drop':>10}"]
    for name, title in align_lab.PATH_TITLES.items():
        row = report["summary"][name]
        lines.append(f"{title:>26} {row['w2']:>12.4g} {row['mean_distance']:>14.4g} {row['barrier']:>13.4f} "
                     f"{row['accuracy_barrier']:>10.4f}")
    return "\n".join(lines)
