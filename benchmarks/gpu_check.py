"""The CUDA path, checked in one command on whatever device this machine has.

    python benchmarks/gpu_check.py [--subset N] [--widths 64,1024] [--networks 50] [--timeout-s 240]

1. MNIST: MFVI and SGM (InfoNCE, blocks) one epoch at each width, on the GPU and on the CPU in this process:
   each epoch's training seconds (the evaluation after it is not counted), CPU/GPU ratios, peak GPU memory.
2. Agreement. The same parameters, weight noise and minibatch give one step's ELBO gradients and SGM's block
   estimate of I on both devices within float32 rounding (relative 1e-4). The same seed's epoch agrees within the
   spread of seeds (accuracy ±2 points, mean training ELBO ±2 %): the devices' generators draw different
   streams from one seed, so one epoch on each is two draws of the same law.
3. A run launched as the page launches it (the registry, a worker process, the device the page leaves at "auto"):
   it must finish, recorded on the device this check found.
4. The forkserver the pages compute in: its preloaded modules leave CUDA uninitialised, and a forked worker can
   use the GPU.
5. The posterior-approximations lab's reference training (``--networks`` networks stepped as one computation) on
   both: networks per second, and the same networks (their random streams are drawn on the CPU): test accuracy
   within 0.5 points.
6. Ray with a GPU resource, where Ray is installed and sees one.
7. Full-batch HMC on that lab's posterior (its convnet on the training images, ``--hmc-chains`` chains as one
   computation): the log density and its gradient agree on both devices (relative 1e-4), a short run draws
   finite samples on each, and the seconds per transition give the hours a reference run of 500 warm-up and
   500 draws per chain would take.

Ends with one JSON line; exits 1 on any disagreement. Without a GPU it says so in one line, runs the CPU half
(fewer images unless --subset says otherwise) and exits 0 unless the CPU half fails.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from symlab.labs.methods import experiment as methods  # noqa: E402
from symlab.labs.mnist import experiment as mnist  # noqa: E402
from symlab.lib import blocks, ensembles, hmc, mnist_data, networks, uncertainty  # noqa: E402
from symlab.runs.device import describe_device, machine_rates  # noqa: E402
from symlab.specs import settings  # noqa: E402

VARIANTS = {
    "mfvi": dict(method="mfvi"),
    "sgm-infonce": dict(method="sgm", mi="infonce"),
    "sgm-blocks": dict(method="sgm", mi="blocks"),
}
GRADIENT_TOLERANCE = 1e-4  # relative, of one step's gradients: float32 sums in another order
ACCURACY_POINTS = 2.0  # percentage points of test accuracy after one epoch (3 seeds span 1.2 here)
ELBO_SHARE = 0.02  # of the mean training ELBO after one epoch (4 seeds span 0.7 % here)
REFERENCE_POINTS = 0.5  # percentage points of the reference networks' mean test accuracy
CPU_ONLY_SUBSET = 2000  # images an epoch trains on where there is no GPU to compare with
HMC_TOLERANCE = 1e-4  # relative, of the full-batch log density and its gradient: float32 sums in another order
HMC_SHORT = hmc.HmcSettings(warmup=10, samples=5, trajectory_length=0.05, adapt_mass=False)
HMC_REFERENCE_TRANSITIONS = 1000  # a reference run: 500 warm-up and 500 draws per chain


def synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------- 1. MNIST epochs


def mnist_config(variant: str, width: int, subset: int, seed: int = 0) -> mnist.MnistConfig:
    return mnist.MnistConfig(hidden=width, epochs=1, train_subset=subset, seed=seed, **VARIANTS[variant])


def mnist_epoch(data, variant: str, width: int, subset: int, device: torch.device, seed: int = 0) -> dict:
    """One epoch of one variant on ``device``: its training seconds, test accuracy, mean training ELBO and the
    GPU memory it took at most."""
    config = mnist_config(variant, width, subset, seed)
    trainer = mnist.MnistTrainer(config, mnist.prepare_tensors(data, config, device), device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    synchronise(device)
    metrics = trainer.train_epoch()
    synchronise(device)
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {
        "seconds": metrics["seconds"],
        "test_acc": metrics["test_acc"],
        "train_elbo": metrics["train_elbo"],
        "peak_gpu_mib": None if peak is None else round(peak, 1),
    }


def mnist_rows(data, widths, subset: int, devices) -> list[dict]:
    rows = []
    for width in widths:
        for variant in VARIANTS:
            row = {"width": width, "variant": variant}
            for device in devices:
                epoch = mnist_epoch(data, variant, width, subset, device)
                row[device.type] = epoch
                say(
                    f"  width {width:>5} {variant:<12} {device.type:<4} {epoch['seconds']:8.2f} s  "
                    f"accuracy {epoch['test_acc']:.4f}  ELBO {epoch['train_elbo']:,.0f}"
                )
            if "cuda" in row:
                row["cpu_over_gpu"] = round(row["cpu"]["seconds"] / row["cuda"]["seconds"], 2)
            rows.append(row)
    return rows


def epoch_disagreements(rows) -> list[str]:
    """Where the same seed's epoch on the GPU differs from the CPU's by more than two seeds differ."""
    problems = []
    for row in rows:
        if "cuda" not in row:
            continue
        cpu, gpu = row["cpu"], row["cuda"]
        name = f"width {row['width']} {row['variant']}"
        if abs(cpu["test_acc"] - gpu["test_acc"]) * 100 > ACCURACY_POINTS:
            problems.append(
                f"{name}: test accuracy {cpu['test_acc']:.4f} on the CPU, {gpu['test_acc']:.4f} on the "
                f"GPU (more than {ACCURACY_POINTS} points apart)"
            )
        if abs(cpu["train_elbo"] - gpu["train_elbo"]) > ELBO_SHARE * abs(cpu["train_elbo"]):
            problems.append(
                f"{name}: training ELBO {cpu['train_elbo']:,.0f} on the CPU, {gpu['train_elbo']:,.0f} on "
                f"the GPU (more than {ELBO_SHARE:.0%} apart)"
            )
    return problems


# ---------------------------------------------------------------------------------------------- 2. one step


def step_agreement(data, width: int, device: torch.device) -> dict:
    """One step's ELBO gradients (the reparameterisation estimator) and SGM's block estimate of I from the same
    μ, log σ, weight noise and minibatch on the CPU and on ``device``: the largest difference relative to the
    largest value, for each."""
    config = mnist_config("sgm-blocks", width, 1000)
    trainers = [
        mnist.MnistTrainer(config, mnist.prepare_tensors(data, config, where), where)
        for where in (torch.device("cpu"), device)
    ]
    source = trainers[0]
    with torch.no_grad():  # σ spread out from its initial value, so that the blocks join units of unequal σ
        source.log_sd.add_(torch.randn(source.log_sd.shape, generator=torch.Generator().manual_seed(1)))
        trainers[1].mu.copy_(source.mu)
        trainers[1].log_sd.copy_(source.log_sd)
    noise = torch.randn(source.layout.n_params, generator=torch.Generator().manual_seed(2))
    plan = blocks.plan_state(
        blocks.plan_blocks(source.layout, source.mu.detach(), source.log_sd.detach(), config.block_size)
    )
    found = []
    for trainer in trainers:
        where = trainer.device
        batch = torch.arange(config.batch_size, device=where)
        step_noise = noise.to(where)
        nll, grad_mu, grad_log_sd, w = trainer.negative_elbo_gradients(
            trainer.data.train_x[batch], trainer.data.train_y[batch], step_noise, trainer.log_sd.detach().exp()
        )
        information, _ = blocks.block_mutual_info(
            trainer.layout, w, step_noise, trainer.mu, trainer.log_sd, blocks.plan_from_state(plan, where)
        )
        found.append([value.detach().double().cpu().reshape(-1) for value in (nll, grad_mu, grad_log_sd, information)])

    def relative(other, reference):
        return float((other - reference).abs().max() / reference.abs().max().clamp(min=1e-30))

    names = ("nll", "grad_mu", "grad_log_sd", "block_information")
    return {name: relative(other, reference) for name, other, reference in zip(names, found[1], found[0])}


# ---------------------------------------------------------------------------------------------- 3. a page's run


def app_run(subset: int, timeout_s: float) -> dict:
    """A 64-unit MNIST run submitted as the page submits it (device "auto", the registry, a detached worker)."""
    from symlab.labs import run_kinds
    from symlab.runs import supervisor
    from symlab.runs.registry import Registry
    from symlab.specs.run_kind import FINISHED, QUEUED, RUNNING

    with tempfile.TemporaryDirectory() as root:
        registry = Registry(run_kinds(), root)
        config = mnist.MnistConfig(hidden=64, epochs=1, train_subset=subset, seed=0)
        started = time.perf_counter()
        run_id = supervisor.submit(registry, "mnist", config, source="app", owner="gpu-check")
        run = registry.get(run_id)
        while run.status in (QUEUED, RUNNING) and time.perf_counter() - started < timeout_s:
            time.sleep(0.5)
            run = registry.get(run_id)
        log = registry.log_path(run_id)
        result = run.result or {}
        return {
            "status": run.status,
            "device": run.device,
            "finished": run.status == FINISHED,
            "device_name": result.get("device_name"),
            "seconds": round(time.perf_counter() - started, 1),
            "test_acc": result.get("test_acc"),
            "message": run.message,
            "log_tail": log.read_text()[-600:] if log.exists() and run.status != FINISHED else "",
        }


# ---------------------------------------------------------------------------------------------- 4. the forkserver


def forked_worker_uses_cuda(answer) -> None:
    """In a process forked by the pages' forkserver: was CUDA initialised when it began, and does it work now."""
    initialised = torch.cuda.is_initialized()
    try:
        total = float(torch.ones(1024, device="cuda").sum())
        answer.send((initialised, total == 1024.0, ""))
    except Exception as error:  # noqa: BLE001 (reported, not raised: the check says what failed)
        answer.send((initialised, False, f"{type(error).__name__}: {error}"))


def forkserver_check() -> dict:
    from symlab.serving.shared_results import COMPUTE_PRELOAD

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(list(COMPUTE_PRELOAD))
    # By this module's name, not __main__'s: a child of the forkserver imports it from the path it is sent.
    target = importlib.import_module(Path(__file__).stem).forked_worker_uses_cuda
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=target, args=(send,))
    process.start()
    process.join(120)
    if not receive.poll():
        return {"cuda_initialised_before": None, "works": False, "error": f"no answer (exit code {process.exitcode})"}
    initialised, works, error = receive.recv()
    return {"cuda_initialised_before": initialised, "works": works, "error": error}


# ---------------------------------------------------------------------------------------------- 5. the reference


def reference_training(data: methods.Data, config: methods.MethodsConfig, count: int, device: torch.device) -> dict:
    """``count`` reference networks trained as one computation on ``device``: networks per second and their mean
    test accuracy."""
    x, y = data.x.to(device), data.y.to(device)
    synchronise(device)
    started = time.perf_counter()
    flat = ensembles.train_networks(config.arch, x, y, config.recipe(), config.seed, range(count))
    synchronise(device)
    seconds = time.perf_counter() - started
    with torch.no_grad():
        logits = networks.batched_logits(config.arch, flat.cpu(), data.x_test)
    accuracies = [uncertainty.accuracy(torch.log_softmax(one, -1), data.y_test) for one in logits]
    return {
        "seconds": round(seconds, 2),
        "networks_per_second": round(count / seconds, 2),
        "mean_test_acc": sum(accuracies) / len(accuracies),
    }


def reference_rows(count: int, devices) -> dict:
    config = methods.MethodsConfig(epochs=1)
    data = methods.prepare_data(mnist_data.load_mnist(settings.mnist_directory()), config)
    row = {"networks": count, "architecture": config.arch.label, "train_images": config.train_size}
    for device in devices:
        row[device.type] = reference_training(data, config, count, device)
        say(
            f"  {count} reference networks, {device.type:<4} {row[device.type]['seconds']:8.2f} s  "
            f"{row[device.type]['networks_per_second']:.2f} networks/s  "
            f"mean accuracy {row[device.type]['mean_test_acc']:.4f}"
        )
    if "cuda" in row:
        row["gpu_over_cpu_networks_per_second"] = round(
            row["cuda"]["networks_per_second"] / row["cpu"]["networks_per_second"], 2
        )
    return row


# ---------------------------------------------------------------------------------------------- 7. HMC


def hmc_device_row(config, data, start: torch.Tensor, device: torch.device) -> dict:
    """The log density and gradient at ``start`` on ``device``, the seconds of one gradient, and a short run's
    seconds per transition and leapfrog steps."""
    log_density = methods.log_posterior(config, data.x.to(device), data.y.to(device))
    value, gradient = hmc.with_gradient(log_density, start.to(device))  # the first call: kernels loaded
    synchronise(device)
    started = time.perf_counter()
    for _ in range(3):
        hmc.with_gradient(log_density, start.to(device))
    synchronise(device)
    gradient_seconds = (time.perf_counter() - started) / 3
    generator = torch.Generator(device).manual_seed(0)
    state = hmc.warm_up(log_density, start.to(device), HMC_SHORT, generator)
    synchronise(device)
    started = time.perf_counter()
    _, draws = hmc.draw(log_density, state, HMC_SHORT.samples, HMC_SHORT, generator)
    synchronise(device)
    transition_seconds = (time.perf_counter() - started) / HMC_SHORT.samples
    return {
        "log_density": value.cpu(),
        "gradient": gradient.cpu(),
        "gradient_seconds": round(gradient_seconds, 4),
        "transition_seconds": round(transition_seconds, 3),
        "leapfrog_steps": hmc.leapfrog_steps(state.step_size, HMC_SHORT).tolist(),
        "finite": bool(torch.isfinite(draws.samples).all()),
        "reference_run_hours": round(transition_seconds * HMC_REFERENCE_TRANSITIONS / 3600, 2),
    }


def hmc_rows(chains: int, images: int, devices) -> dict:
    config = methods.MethodsConfig(train_size=images)
    data = methods.prepare_data(mnist_data.load_mnist(settings.mnist_directory()), config)
    start = config.arch.init(chains, torch.Generator().manual_seed(0))
    row = {"chains": chains, "train_images": images, "architecture": config.arch.label}
    for device in devices:
        row[device.type] = hmc_device_row(config, data, start, device)
        say(
            f"  HMC, {chains} chains on {images} images, {device.type:<4} {row[device.type]['gradient_seconds']:.4f} s "
            f"a gradient, {row[device.type]['transition_seconds']:.3f} s a transition "
            f"(leapfrog steps {row[device.type]['leapfrog_steps']}): a reference run "
            f"~{row[device.type]['reference_run_hours']} h"
        )
    return row


def hmc_disagreements(row) -> list[str]:
    found = [
        f"HMC's short run on {device} drew non-finite weights"
        for device in ("cpu", "cuda")
        if device in row and not row[device]["finite"]
    ]
    if "cuda" in row:
        for name in ("log_density", "gradient"):
            cpu, cuda = row["cpu"][name], row["cuda"][name]
            gap = float((cpu - cuda).abs().max() / cpu.abs().max().clamp(min=1e-12))
            if gap > HMC_TOLERANCE:
                found.append(
                    f"HMC's full-batch {name.replace('_', ' ')} differs by {gap:.2e} (relative) between devices"
                )
    return found


def hmc_section(result, problems, chains: int, images: int, devices) -> None:
    say("Full-batch HMC on the posterior-approximations lab's posterior:")
    row = hmc_rows(chains, images, devices)
    problems += hmc_disagreements(row)
    result["hmc"] = {
        key: (
            {name: value for name, value in part.items() if name not in ("log_density", "gradient")}
            if isinstance(part, dict)
            else part
        )
        for key, part in row.items()
    }


# ---------------------------------------------------------------------------------------------- 6. Ray


def ray_check() -> dict:
    try:
        import ray
    except ImportError:
        return {"ran": False, "why": "Ray is not installed here"}
    ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        gpus = ray.cluster_resources().get("GPU", 0)
        if not gpus:
            return {"ran": False, "why": "Ray sees no GPU"}

        @ray.remote(num_gpus=1)
        def on_a_gpu():
            import torch as task_torch

            return task_torch.cuda.get_device_name(0), float(task_torch.ones(8, device="cuda").sum())

        name, total = ray.get(on_a_gpu.remote(), timeout=120)
        return {"ran": True, "gpus": gpus, "device": name, "works": total == 8.0}
    finally:
        ray.shutdown()


# ---------------------------------------------------------------------------------------------- the check


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def mnist_section(result, problems, data, widths, subset, devices) -> None:
    say("MNIST, one epoch:")
    result["mnist"] = mnist_rows(data, widths, subset, devices)
    problems += epoch_disagreements(result["mnist"])
    if len(devices) > 1:
        result["peak_gpu_mib"] = max(row["cuda"]["peak_gpu_mib"] for row in result["mnist"])
        result["step_agreement"] = {width: step_agreement(data, width, devices[1]) for width in widths}
        problems += [
            f"width {width}: one step's {name} differs by {value:.2e} (relative) between the devices"
            for width, found in result["step_agreement"].items()
            for name, value in found.items()
            if not value <= GRADIENT_TOLERANCE
        ]


def app_run_section(result, problems, expected: str, timeout_s: float) -> None:
    say("A run launched as the page launches it:")
    run = result["app_run"] = app_run(CPU_ONLY_SUBSET, timeout_s)
    say(f"  {run['status']} on {run['device']} ({run['device_name']}) in {run['seconds']} s")
    if not run["finished"] or run["device"] != expected:
        problems.append(
            f"the launched run ended {run['status']} on {run['device']} (expected finished on "
            f"{expected}): {run['message']} {run['log_tail']}"
        )


def forkserver_section(result, problems) -> None:
    found = result["forkserver"] = forkserver_check()
    if found["cuda_initialised_before"] or not found["works"]:
        problems.append(f"the pages' forkserver: {found}")


def reference_section(result, problems, networks: int, devices) -> None:
    say("The posterior-approximations lab's reference training:")
    row = result["reference"] = reference_rows(networks, devices)
    if "cuda" in row:
        gap = abs(row["cpu"]["mean_test_acc"] - row["cuda"]["mean_test_acc"]) * 100
        if gap > REFERENCE_POINTS:
            problems.append(
                f"the reference networks' mean test accuracy differs by {gap:.2f} points between the devices"
            )


def ray_section(result, problems) -> None:
    found = result["ray"] = ray_check()
    if found.get("ran") and not found.get("works"):
        problems.append(f"Ray's GPU task: {found}")


def attempt(name: str, problems: list, section, *args) -> None:
    """One section of the check; one that raises is a disagreement, and the sections after it still run."""
    try:
        section(*args)
    except Exception as error:  # noqa: BLE001 (reported in the JSON line, traceback on stderr)
        traceback.print_exc()
        problems.append(f"{name} failed: {type(error).__name__}: {error}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--subset",
        type=int,
        default=None,
        help=f"training images per MNIST epoch (default: all 60 000 with a GPU, {CPU_ONLY_SUBSET} without)",
    )
    parser.add_argument("--widths", default="64,1024", help="MNIST hidden widths, comma-separated (default 64,1024)")
    parser.add_argument(
        "--networks",
        type=int,
        default=methods.CHUNK,
        help=f"reference networks trained at once (default {methods.CHUNK}: one stage of the lab's)",
    )
    parser.add_argument("--timeout-s", type=float, default=240, help="how long the launched run may take")
    parser.add_argument("--hmc-chains", type=int, default=8, help="HMC chains run as one computation (default 8)")
    parser.add_argument(
        "--hmc-images",
        type=int,
        default=None,
        help=f"training images HMC conditions on (default: the lab's 10 000 with a GPU, {CPU_ONLY_SUBSET} without)",
    )
    args = parser.parse_args(argv)

    gpu = torch.cuda.is_available()
    devices = [torch.device("cpu")] + ([torch.device("cuda")] if gpu else [])
    subset = args.subset if args.subset is not None else (0 if gpu else CPU_ONLY_SUBSET)
    widths = [int(width) for width in args.widths.split(",")]
    if not gpu:
        print("no GPU: torch finds no CUDA device here; running the CPU half", flush=True)
    rates = machine_rates()
    result = {
        "gpu": gpu,
        "device": describe_device(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "train_images": subset or 60_000,
        "rates": {
            "matmul_gflops": round(rates.matmul_flops / 1e9, 1),
            "elementwise_g": round(rates.elementwise / 1e9, 2),
            "normals_g": round(rates.normals / 1e9, 2),
        },
    }
    say(result["device"])
    data = mnist_data.load_mnist(settings.mnist_directory())
    problems = []
    if gpu:  # CUDA's start and its libraries' first calls, outside every timing
        attempt("the GPU's warm-up", problems, mnist_epoch, data, "sgm-blocks", 64, 1000, devices[1])
    attempt("MNIST", problems, mnist_section, result, problems, data, widths, subset, devices)
    attempt("the launched run", problems, app_run_section, result, problems, devices[-1].type, args.timeout_s)
    if gpu:
        attempt("the forkserver", problems, forkserver_section, result, problems)
    attempt("the reference training", problems, reference_section, result, problems, args.networks, devices)
    hmc_images = args.hmc_images or (methods.MethodsConfig().train_size if gpu else CPU_ONLY_SUBSET)
    attempt("HMC", problems, hmc_section, result, problems, args.hmc_chains, hmc_images, devices)
    if gpu:
        attempt("Ray", problems, ray_section, result, problems)
    else:
        result["ray"] = {"ran": False, "why": "no GPU"}

    result["disagreements"] = problems
    result["ok"] = not problems
    for problem in problems:
        say(f"DISAGREES: {problem}")
    print(json.dumps(result, separators=(",", ":")), flush=True)
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
