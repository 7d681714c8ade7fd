"""Networks from files (symlab.lib.weights): what reads, and every hostile file, generated here.

A hostile file must end in a WeightsError whose message says what was wrong: never another exception,
and never code execution (the sentinel file a malicious pickle would create must not appear).
"""

import io
import json
import math
import os
import pickle
import re
import struct
from pathlib import Path

import hostile_files
import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_bytes

from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.lib import mlp, weights
from symlab.lib.weights import WeightsError

ROOT = Path(__file__).resolve().parents[1]


def mlp_module(*sizes, bias=True):
    layers = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        layers += [torch.nn.Linear(fan_in, fan_out, bias=bias), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def torch_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


# --- what reads ------------------------------------------------------------------------------------


def test_a_torch_saved_state_dict_reads_with_its_structure_inferred():
    torch.manual_seed(0)
    net = mlp_module(784, 128, 10)
    network = weights.read_network(torch_bytes(net.state_dict()), "net.pt")
    assert network.sizes == (784, 128, 10) and not network.is_posterior
    assert network.n_parameters == 784 * 128 + 128 + 128 * 10 + 10
    assert network.describe().startswith("784 → 128 → 10: 2 nn.Linear layers")
    x = torch.randn(5, 784)
    expected = net(x).detach().double().numpy()
    np.testing.assert_allclose(mlp.forward(network.means, x.double().numpy()), expected, rtol=1e-5, atol=1e-6)


def test_named_layers_checkpoints_missing_biases_and_safetensors_key_order_all_read(tmp_path):
    class Named(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = torch.nn.Linear(6, 5), torch.nn.Linear(5, 4), torch.nn.Linear(4, 3)

    assert weights.read_network(torch_bytes(Named().state_dict())).sizes == (6, 5, 4, 3)
    wrapped = {"state_dict": mlp_module(6, 5, 3).state_dict(), "epoch": 7}
    assert weights.read_network(torch_bytes(wrapped)).sizes == (6, 5, 3)
    no_bias = weights.read_network(torch_bytes(mlp_module(6, 5, 3, bias=False).state_dict()))
    assert no_bias.sizes == (6, 5, 3) and not no_bias.means[0][1].any()
    # Twelve layers: safetensors sorts its keys ("10.weight" before "2.weight"); the chain still comes out.
    sizes = (8, 7, 6, 5, 4, 3, 2, 3, 4, 5, 6, 7, 9)
    deep = {key: value.contiguous() for key, value in mlp_module(*sizes).state_dict().items()}
    path = tmp_path / "deep.safetensors"
    path.write_bytes(safetensors_bytes(deep))
    assert weights.read_network(path).sizes == sizes


def test_a_bias_free_net_counts_only_its_weights_and_the_bound_uses_that_count():
    """784-32-10 with bias=False: 25 408 parameters, not 25 450 with the absent biases counted as zeros."""
    torch.manual_seed(0)
    network = weights.read_network(torch_bytes(mlp_module(784, 32, 10, bias=False).state_dict()), "nobias.pt")
    assert network.n_parameters == 784 * 32 + 32 * 10 == 25_408
    assert network.has_bias == (False, False) and "25,408 parameters (no bias in layers 1, 2)" in network.describe()
    report = symmetry_lab.network_report(network)
    assert report.n_parameters == 25_408
    [layer] = report.nearest_modes
    assert layer["bound"] == pytest.approx(2 * 25_408 / math.lgamma(33), rel=1e-12)
    # 2D / log n! ≈ 623 here: any permutation moves w by at most 2‖w‖, so "below the bound" says nothing.
    assert layer["bound_vacuous"] and layer["below_bound"] is None
    mixed = mlp_module(6, 5, 3)
    state = {key: value for key, value in mixed.state_dict().items() if key != "2.bias"}
    partly = weights.read_network(torch_bytes(state))
    assert partly.has_bias == (True, False) and partly.n_parameters == 6 * 5 + 5 + 5 * 3


def test_an_exported_posterior_round_trips_and_loads_into_a_plain_sequential():
    generator = torch.Generator().manual_seed(1)
    layout = mlp.Layout((6, 5, 3))
    mu = torch.randn(layout.n_params, generator=generator)
    sd = torch.rand(layout.n_params, generator=generator) + 0.1
    means, sds = (
        [tuple(t.numpy() for t in layer) for layer in layout.layers(mu)],
        [tuple(t.numpy() for t in layer) for layer in layout.layers(sd)],
    )
    data = weights.posterior_bytes(means, sds, {"config": {"hidden": 5}, "run_id": 3})
    network = weights.read_network(data, "posterior.safetensors")
    assert network.is_posterior and network.sizes == (6, 5, 3)
    assert network.metadata["format"] == weights.FORMAT and network.metadata["run_id"] == "3"
    for (W, b), (W_expected, b_expected) in zip(network.sds, sds):
        np.testing.assert_array_equal(W, W_expected.astype(np.float32))
        np.testing.assert_array_equal(b, b_expected.astype(np.float32))
    from safetensors.torch import load

    net = mlp_module(6, 5, 3)
    missing, unexpected = net.load_state_dict(load(data), strict=False)
    assert not missing and sorted(unexpected) == sorted("sd." + key for key in net.state_dict())
    x = torch.randn(4, 6)
    np.testing.assert_allclose(net(x).detach().numpy(), mlp.forward(layout.layers(mu), x).numpy(), rtol=1e-6)


# --- hostile files -------------------------------------------------------------------------------


class Payload:
    """A pickle that runs code when unpickled: it would create the sentinel file."""

    def __init__(self, sentinel):
        self.sentinel = str(sentinel)

    def __reduce__(self):
        return os.system, (f"touch {self.sentinel}",)


def hostile_cases(sentinel):
    good = torch_bytes(mlp_module(6, 5, 3).state_dict())
    safe = safetensors_bytes({k: v.contiguous() for k, v in mlp_module(6, 5, 3).state_dict().items()})
    state = mlp_module(6, 5, 3).state_dict()
    nan_state = {**state, "0.weight": state["0.weight"].clone().fill_(float("nan"))}
    inf_state = {**state, "2.bias": torch.tensor([1.0, float("inf"), 0.0])}
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.Flatten(), torch.nn.Linear(4 * 26 * 26, 10))
    batchnorm = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3))
    return {
        "code in a torch file": (torch_bytes({"0.weight": Payload(sentinel)}), "refused: the file holds objects"),
        "code in a bare pickle": (pickle.dumps(Payload(sentinel), protocol=2), "refused: the file holds objects"),
        "a whole pickled module": (torch_bytes(mlp_module(6, 5, 3)), "refused: the file holds objects"),
        "truncated torch file": (good[: len(good) // 2], "truncated or corrupt PyTorch file"),
        "truncated safetensors": (safe[: len(safe) - 20], "truncated"),
        "safetensors header cut": (safe[:40], "truncated safetensors file"),
        "empty file": (b"", "the file is empty"),
        "random bytes": (bytes(range(256)) * 4, "not a PyTorch state_dict"),
        "a convolutional net": (torch_bytes(conv.state_dict()), "shape \\(4, 1, 3, 3\\), a convolutional layer's"),
        "batch norm": (torch_bytes(batchnorm.state_dict()), "a normalisation layer's"),
        "extra tensors": (torch_bytes({**state, "scale": torch.ones(1)}), "'scale' belong to no nn.Linear layer"),
        "NaN weights": (torch_bytes(nan_state), "NaN or infinite"),
        "an infinite bias": (torch_bytes(inf_state), "1 NaN or infinite value"),
        "integer weights": (torch_bytes({k: v.to(torch.int32) for k, v in state.items()}), "int32, not floating point"),
        "shapes that do not chain": (torch_bytes({**state, "2.weight": torch.zeros(3, 4)}), "do not chain"),
        "a bias of the wrong size": (
            torch_bytes({**state, "0.bias": torch.zeros(7)}),
            "bias has shape \\(7,\\), but 0.weight has 5 outputs",
        ),
        "one layer only": (torch_bytes(torch.nn.Linear(6, 3).state_dict()), "needs two or more"),
        "a bare tensor": (torch_bytes(torch.zeros(3)), "holds a Tensor, not a state_dict"),
        "a list": (torch_bytes([torch.zeros(3)]), "holds a list, not a state_dict"),
        "no tensors": (torch_bytes({}), "holds no tensors"),
        "overlapping rows": (hostile_files.overlapping_view(), "0.weight is a view that repeats or overlaps"),
        "an archive that expands past the cap": (
            hostile_files.deflated(100 * 10**6),
            "its archive expands to 101 MB, over the 64 MB cap",
        ),
        "200 layers": (hostile_files.deep_chain(), "200 nn.Linear layers, over the 64 this reader takes"),
        "no hidden units": (hostile_files.no_hidden_units(), "every layer needs at least one input and one unit"),
        "negative standard deviations": (
            weights.posterior_bytes(
                [(np.ones((5, 6)), np.ones(5)), (np.ones((3, 5)), np.ones(3))],
                [(-np.ones((5, 6)), np.ones(5)), (np.ones((3, 5)), np.ones(3))],
            ),
            "negative standard deviations",
        ),
    }


CASES = sorted(hostile_cases("unused"))


@pytest.mark.parametrize("case", CASES)
def test_every_hostile_file_ends_in_a_message(case, tmp_path):
    sentinel = tmp_path / "code-ran"
    data, message = hostile_cases(sentinel)[case]
    path = tmp_path / "upload.bin"
    path.write_bytes(data)
    for source in (data, path):
        with pytest.raises(WeightsError, match=message):
            weights.read_network(source, "upload.bin")
    assert not sentinel.exists()


def test_files_over_the_cap_are_refused_before_they_are_read(tmp_path, monkeypatch):
    data = torch_bytes(mlp_module(6, 5, 3).state_dict())
    monkeypatch.setattr(weights, "MAX_FILE_BYTES", len(data) - 1)
    path = tmp_path / "big.pt"
    path.write_bytes(data)
    for source in (data, path):
        with pytest.raises(WeightsError, match=rf"over the {(len(data) - 1) / 10**6:g} MB cap"):
            weights.read_network(source, "big.pt")
    with pytest.raises(WeightsError, match="cannot read it"):
        weights.read_network(tmp_path / "missing.pt")


def read_with_little_memory(data: bytes, name: str, memory_mb: int = 512) -> str:
    """What reading ``data`` ends in, read in a forked process whose address space may grow by ``memory_mb`` only
    (a reader that copies what a file describes before checking it runs out there, not here)."""
    import multiprocessing
    import resource

    def read(connection):
        with open("/proc/self/statm") as statm:
            now = int(statm.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (now + memory_mb * 2**20,) * 2)
        try:
            weights.read_network(data, name)
            connection.send("read")
        except WeightsError as error:
            connection.send(f"refused: {error}")
        except (MemoryError, RuntimeError) as error:
            connection.send(f"out of memory: {type(error).__name__}")

    ours, theirs = multiprocessing.get_context("fork").Pipe()
    process = multiprocessing.get_context("fork").Process(target=read, args=(theirs,))
    process.start()
    process.join(120)
    return ours.recv() if ours.poll() else f"died ({process.exitcode})"


@pytest.mark.parametrize(
    "make, reason",
    [
        (
            hostile_files.stride_zero_view,
            "0.weight is a view that repeats or overlaps its stored numbers (shape (100000, 8000), strides (0, 0))",
        ),
        (lambda: hostile_files.deflated(10**9), "its archive expands to 1,014 MB, over the 64 MB cap"),
    ],
)
def test_a_small_file_that_describes_gigabytes_is_refused_before_they_are_made(make, reason):
    assert read_with_little_memory(make(), "small.pt").startswith(f"refused: small.pt: {reason}")


def test_views_that_repeat_no_number_read_and_a_librarys_shared_copies_count_once():
    state = mlp_module(6, 5, 3).state_dict()
    transposed = {**state, "0.weight": state["0.weight"].t().contiguous().t()}  # strides (1, 5): no repeats
    assert weights.read_network(torch_bytes(transposed)).sizes == (6, 5, 3)
    many = {f"{index}.weight": torch.zeros(2048, 2048, dtype=torch.float16) for index in range(0, 10, 2)}  # 42 MB
    with pytest.raises(WeightsError, match=f"hold more than {weights.MAX_NUMBERS:,} numbers"):
        weights.read_network(torch_bytes(many), "many.pt")


def test_the_browsers_upload_limit_is_the_readers():
    import tomllib

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == weights.MAX_FILE_MB
    assert weights.MAX_FILE_BYTES == weights.MAX_FILE_MB * 10**6  # as Streamlit's uploader counts and states it


def test_two_networks_must_match_to_be_aligned():
    a = weights.read_network(torch_bytes(mlp_module(784, 128, 10).state_dict()), "a.pt")
    b = weights.read_network(torch_bytes(mlp_module(784, 64, 10).state_dict()), "b.pt")
    with pytest.raises(WeightsError, match="a.pt is 784-128-10, b.pt is 784-64-10"):
        weights.check_pair(a, b)
    sds = [(np.abs(W), np.abs(b)) for W, b in a.means]
    posterior = weights.read_network(weights.posterior_bytes(a.means, sds), "q.safetensors")
    with pytest.raises(WeightsError, match="a.pt is a point estimate and the other a posterior"):
        weights.check_pair(a, posterior)
    weights.check_pair(a, a)


# --- the command line: --weights, and exports ------------------------------------------------------


def cli_json(capsys, *args):
    from symlab import cli

    assert cli.main([*args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def cli_error(capsys, *args) -> str:
    from symlab import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(list(args))
    err = capsys.readouterr().err
    assert stopped.value.code in (1, 2) and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def permuted_copy(net: torch.nn.Sequential, generator) -> torch.nn.Sequential:
    """The same function with its hidden units reordered."""
    copy = mlp_module(*[net[0].in_features, net[0].out_features, net[2].out_features])
    order = torch.randperm(net[0].out_features, generator=generator)
    with torch.no_grad():
        copy[0].weight.copy_(net[0].weight[order])
        copy[0].bias.copy_(net[0].bias[order])
        copy[2].weight.copy_(net[2].weight[:, order])
        copy[2].bias.copy_(net[2].bias)
    return copy


def test_the_symmetry_cli_analyses_a_file(tmp_path, capsys):
    torch.manual_seed(3)
    path = tmp_path / "net.pt"
    torch.save(mlp_module(784, 128, 10).state_dict(), path)
    report = cli_json(capsys, "symmetry", "network", "--weights", str(path))
    assert report["sizes"] == [784, 128, 10] and report["structure"].startswith("784 → 128 → 10")
    [layer] = report["nearest_modes"]
    assert layer["width"] == 128 and 0 < layer["relative_distance"] < layer["bound"]
    assert report["check_inputs"] == "the first 256 MNIST test images"
    assert max(report["permutation_removal_change"], report["scaling_removal_change"], report["min_mass_change"]) < 1e-9
    assert report["mass_after"] < report["mass_before"] and report["min_mass_converged"]
    assert report["mnist_scaling"] in weights.INPUT_SCALINGS and 0 <= report["mnist_accuracy"] <= 1


def test_the_align_cli_recovers_a_permuted_copy_of_a_file(tmp_path, capsys):
    torch.manual_seed(4)
    net = mlp_module(784, 64, 10)
    a, b = tmp_path / "a.pt", tmp_path / "b.safetensors"
    torch.save(net.state_dict(), a)
    b.write_bytes(
        safetensors_bytes(
            {k: v.contiguous() for k, v in permuted_copy(net, torch.Generator().manual_seed(5)).state_dict().items()}
        )
    )
    report = cli_json(capsys, "align", "--weights", str(a), str(b))
    assert report["names"] == ["a.pt", "b.safetensors"] and not report["posterior"]
    assert report["w2_before"] > 1 and report["w2_after"] < 1e-5
    assert report["summary"]["w2"]["units_moved"][0] > 50
    assert report["barrier_after"] == pytest.approx(0, abs=1e-5) and report["accuracy_a"] == report["accuracy_b"]
    text = cli_error(capsys, "align", "--weights", str(a), str(tmp_path / "missing.pt"))
    assert "missing.pt: cannot read it" in text


@pytest.mark.parametrize("case", CASES)
def test_the_clis_refuse_hostile_files_in_one_line(case, tmp_path, capsys):
    sentinel = tmp_path / "code-ran"
    data, message = hostile_cases(sentinel)[case]
    path = tmp_path / "upload.pt"
    path.write_bytes(data)
    good = tmp_path / "good.pt"
    torch.save(mlp_module(6, 5, 3).state_dict(), good)
    for args in (("symmetry", "network", "--weights", str(path)), ("align", "--weights", str(good), str(path))):
        assert re.search(message, cli_error(capsys, *args))
    mismatched = tmp_path / "wider.pt"
    torch.save(mlp_module(6, 7, 3).state_dict(), mismatched)
    assert "good.pt is 6-5-3, wider.pt is 6-7-3" in cli_error(capsys, "align", "--weights", str(good), str(mismatched))
    assert not sentinel.exists()


def test_an_exported_mnist_run_loads_into_torch_with_the_runs_accuracy(tmp_path, capsys):
    from safetensors.torch import load_file

    from symlab.lib import mnist_data
    from symlab.lib.mnist_data import PIXEL_MEAN, PIXEL_STD

    runs = str(tmp_path / "runs")
    run = cli_json(
        capsys,
        "mnist",
        "--hidden",
        "48",
        "--epochs",
        "2",
        "--train-subset",
        "5000",
        "--init-sd",
        "0.01",
        "--runs-dir",
        runs,
    )
    path = tmp_path / "posterior.safetensors"
    exported = cli_json(capsys, "mnist", "--runs-dir", runs, "--export", str(run["run_id"]), str(path))
    assert exported["epochs_done"] == 2 and "784 → 48 → 10" in exported["structure"]
    net = mlp_module(784, 48, 10)
    missing, unexpected = net.load_state_dict(load_file(path), strict=False)
    assert not missing and all(key.startswith("sd.") for key in unexpected)
    data = mnist_data.load_mnist()
    x = (torch.from_numpy(np.asarray(data.test_images, dtype=np.float32)) / 255 - PIXEL_MEAN) / PIXEL_STD
    with torch.no_grad():
        accuracy = float(
            (net(x).argmax(1) == torch.from_numpy(np.asarray(data.test_labels, dtype=np.int64))).float().mean()
        )
    # The run's accuracy averages 10 weight draws; the mean network's is within a point of it.
    assert accuracy == pytest.approx(run["test_acc"], abs=0.01) and accuracy > 0.85
    network = weights.read_network(path)
    assert network.is_posterior and json.loads(network.metadata["config"])["hidden"] == 48
    assert cli_error(capsys, "mnist", "--runs-dir", runs, "--export", "9", str(path)).endswith(
        f"no run #9 in {runs}/registry.sqlite3\n"
    )


def test_the_alignment_pair_exports_as_three_files_that_read_back(tmp_path, capsys):
    report = cli_json(
        capsys, "align", "--steps", "60", "--width", "16", "--depth", "1", "--export", str(tmp_path / "pair")
    )
    assert [Path(p).name for p in report["exported"]] == [
        "q_a.safetensors",
        "q_b.safetensors",
        "q_b_aligned.safetensors",
    ]
    qa, qb, aligned = (weights.read_network(p) for p in report["exported"])
    assert qa.sizes == qb.sizes == aligned.sizes == (2, 16, 2) and aligned.is_posterior
    from symlab.lib import align

    assert align.w2_distance(qa.gaussian(), aligned.gaussian()) == pytest.approx(report["w2_after"], rel=1e-5)
    assert align.w2_distance(qa.gaussian(), qb.gaussian()) == pytest.approx(report["w2_before"], rel=1e-5)
    assert json.loads(aligned.metadata["config"])["width"] == 16


def test_two_files_of_ones_own_export_b_aligned_and_the_permutations(tmp_path, capsys):
    """``align --weights A B --export DIR`` writes what the page downloads; a bias-free B stays bias-free."""
    torch.manual_seed(6)
    net = mlp_module(7, 12, 9, 3, bias=False)
    order = [
        torch.randperm(12, generator=torch.Generator().manual_seed(7)),
        torch.randperm(9, generator=torch.Generator().manual_seed(8)),
    ]
    copy = mlp_module(7, 12, 9, 3, bias=False)
    with torch.no_grad():
        copy[0].weight.copy_(net[0].weight[order[0]])
        copy[2].weight.copy_(net[2].weight[order[1]][:, order[0]])
        copy[4].weight.copy_(net[4].weight[:, order[1]])
    a, b = tmp_path / "a.pt", tmp_path / "b.pt"
    torch.save(net.state_dict(), a)
    torch.save(copy.state_dict(), b)
    report = cli_json(capsys, "align", "--weights", str(a), str(b), "--export", str(tmp_path / "out"))
    assert [Path(p).name for p in report["exported"]] == ["b_aligned.safetensors", "permutations.csv"]
    aligned = weights.read_network(report["exported"][0])
    assert aligned.has_bias == (False, False, False) and aligned.n_parameters == 7 * 12 + 12 * 9 + 9 * 3
    for (Wa, _), (Wb, _) in zip(weights.read_network(a).means, aligned.means):
        np.testing.assert_allclose(Wb, Wa, rtol=0, atol=0)  # the permuted copy put back exactly
    rows = (tmp_path / "out" / "permutations.csv").read_text().splitlines()
    assert rows[0] == "layer,unit_of_a,unit_of_b" and len(rows) == 1 + 12 + 9
    found = [[int(r.split(",")[2]) for r in rows[1:] if r.startswith(f"{layer},")] for layer in (1, 2)]
    assert found == report["permutations"]
    # unit k of aligned B is unit found[k] of B: B's unit order[k] came from A's unit k, so found[k] = order⁻¹[k]
    assert found == [torch.argsort(o).tolist() for o in order]
    assert cli_error(capsys, "align", "--weights", str(a), str(b), "--export", str(a / "x")).endswith(
        "(Not a directory)\n"
    )


def test_degenerate_networks_are_reported_not_crashed_on(tmp_path, capsys):
    from symlab import cli

    zero = {key: torch.zeros_like(value) for key, value in mlp_module(5, 4, 2).state_dict().items()}
    for name, state in (("zero.pt", zero), ("one-unit.pt", mlp_module(5, 1, 2).state_dict())):
        path = tmp_path / name
        torch.save(state, path)
        assert cli.main(["symmetry", "network", "--weights", str(path)]) == 0
        text = capsys.readouterr().out
        assert "n/a" in text and "converged" in text, text
        report = cli_json(capsys, "symmetry", "network", "--weights", str(path))
        assert report["nearest_modes"][0]["relative_distance"] is None  # ‖w‖ = 0, or no second unit


def test_a_file_of_many_tensors_is_refused_from_its_header():
    """A 15 MB safetensors file of 200 000 empty tensors had no answer in 120 s: the tensor count is the first bound
    it crosses, read from the header before a tensor is made; a torch file's from its archive's directory."""
    count = 200_000
    header = json.dumps({f"t{i}": {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]} for i in range(count)})
    data = struct.pack("<Q", len(header)) + header.encode()
    with pytest.raises(weights.WeightsError, match=f"holds {count:,} tensors, over this reader's cap of 1,024"):
        weights.read_network(data, "empty.safetensors")
    many = io.BytesIO()
    torch.save({f"layer{i}.weight": torch.zeros(1, 1) for i in range(weights.MAX_TENSORS + 1)}, many)
    with pytest.raises(weights.WeightsError, match=f"holds {weights.MAX_TENSORS + 1:,} tensors"):
        weights.read_network(many.getvalue(), "many.pt")
