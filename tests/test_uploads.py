"""Uploads read and analysed in processes of their own (symlab.serving.uploads): each attack ends in its message,
within the limits, while the server's own memory stays where it was."""

import resource
import threading
import time

import hostile_files
import pytest
import upload_functions

from symlab.labs.align import experiment as align_lab
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.serving import uploads
from symlab.specs.settings import HOSTED_DEFAULTS, LiveLimits

LIMITS = uploads.AnalysisLimits(concurrent=2, memory_mb=1024, cpu_seconds=30)
MiB = 2**20


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def analysed(function, files, options=(), limits=LIMITS, **callbacks):
    return uploads.analyse(function, files, options, limits=limits, **callbacks)


def test_a_network_is_read_and_measured_in_its_own_process():
    found = analysed(symmetry_lab.uploaded_network, [("net.pt", hostile_files.small_network())], ("max_in",))
    assert found.description.startswith("6 → 5 → 3: 2 nn.Linear layers")
    assert [row["outputs"] for row in found.layers] == [5, 3]
    assert found.pictured.shape == found.pictured_sorted.shape == (5, 6) and found.units_per_row == 1
    assert sorted(map(tuple, found.pictured_sorted.tolist())) == sorted(map(tuple, found.pictured.tolist()))
    assert found.report.raw_layers is None  # the network itself stays in the analysis's process


def test_a_wide_layer_comes_back_as_what_its_pictures_show_and_its_table_when_asked():
    import numpy as np

    from symlab.lib import symmetry, weights

    data = hostile_files.wide_network(300)
    found = analysed(symmetry_lab.uploaded_network, [("net.pt", data)], ("max_in",))
    network = weights.read_network(data, "net.pt")
    W = network.means[0][0]
    assert found.pictured.shape == (300, 64) and found.pictured.dtype == np.float32
    assert (found.pictured == W[:, found.pictured_inputs].astype(np.float32)).all()
    order = symmetry.sorting_orders(symmetry.as_layers(network.means), "max_in")[0]
    assert (found.pictured_sorted == W[order][:, found.pictured_inputs].astype(np.float32)).all()
    for sort in (False, True):
        table = analysed(symmetry_lab.first_layer_csv, [("net.pt", data)], ("max_in", sort)).decode().splitlines()
        assert table[0] == "unit," + ",".join(map(str, range(784))) and len(table) == 301
        rows = np.array([[float(v) for v in line.split(",")] for line in table[1:]])
        order = symmetry.sorting_orders(symmetry.as_layers(network.means), "max_in")[0] if sort else np.arange(300)
        assert (rows[:, 0] == np.arange(300)).all() and (rows[:, 1:] == W[order]).all()


def test_a_picture_of_more_units_than_a_chart_has_rows_shows_their_means():
    import numpy as np

    W = np.arange(2100 * 3, dtype=float).reshape(2100, 3)
    rows, group = symmetry_lab.picture_rows(W)
    assert group == 3 and rows.shape == (700, 3)
    np.testing.assert_allclose(rows[0], W[:3].mean(axis=0))
    np.testing.assert_allclose(rows[-1], W[-3:].mean(axis=0))
    rows, group = symmetry_lab.picture_rows(W[:2050])  # groups of 3, the last of one unit
    assert group == 3 and rows.shape == (684, 3)
    np.testing.assert_allclose(rows[-1], W[2049])
    assert symmetry_lab.picture_rows(W[:1024])[1] == 1


@pytest.mark.parametrize(
    "file, reason",
    [
        (hostile_files.stride_zero_view, "0.weight is a view that repeats or overlaps its stored numbers"),
        (hostile_files.overlapping_view, "0.weight is a view that repeats or overlaps its stored numbers"),
        (lambda: hostile_files.deflated(200 * 10**6), "its archive expands to 203 MB, over the 64 MB cap"),
        (hostile_files.deep_chain, "200 nn.Linear layers, over the 64 this reader takes"),
        (
            hostile_files.no_hidden_units,
            "0.weight has shape (0, 784): every layer needs at least one input and one unit",
        ),
        (lambda: hostile_files.wide_network(9000), "a hidden layer of 9,000 units, over the 8,192 this page allows"),
    ],
)
def test_each_attack_ends_in_its_message_and_the_server_keeps_its_memory(file, reason):
    data = file()
    before = peak_rss_mib()
    with pytest.raises(uploads.UploadRefused) as refused:
        analysed(symmetry_lab.uploaded_network, [("attack.pt", data)], ("max_in",))
    assert str(refused.value).startswith(f"attack.pt: {reason}")
    assert peak_rss_mib() - before < 100  # the file's bytes, not what they expand to


def test_a_pair_is_aligned_in_its_own_process_and_b_aligned_comes_back_as_a_file():
    files = [("a.pt", hostile_files.small_network(0)), ("b.pt", hostile_files.small_network(1))]
    pair = analysed(align_lab.uploaded_pair, files, (5, 4, 0, 1))
    assert pair.alignment.qa is None and pair.alignment.ends is None
    assert [len(views) for views in pair.assignments.values()] == [1, 1]
    written = analysed(align_lab.uploaded_pair_file, files, (pair.alignment.permutations, pair.alignment.w2_after))
    from symlab.lib import weights

    aligned = weights.read_network(written, "b_aligned.safetensors")
    assert aligned.sizes == (6, 5, 3) and aligned.metadata["aligned_to"] == "a.pt"


def test_an_assignment_view_keeps_its_first_units_and_the_matches_among_them():
    from symlab.lib import align, weights

    files = [hostile_files.wide_network(100, seed) for seed in (0, 1)]
    a, b = (weights.read_network(data, "net.pt").gaussian() for data in files)
    perms = align.align(a, b, "w2").perms
    for aligned in (False, True):
        whole = align_lab.assignment_view(a, b, perms, 0, aligned)
        block = align_lab.assignment_view(a, b, perms, 0, aligned, units=10)
        assert block.distance.shape == block.above_nearest.shape == (10, 10)
        assert (block.distance == whole.distance[:10, :10]).all() and (block.columns == whole.columns[:10]).all()
        inside = whole.matched[:10] < 10
        assert (block.matched == [m if i else -1 for m, i in zip(whole.matched[:10], inside)]).all()


def test_memory_past_the_ceiling_ends_in_a_message():
    with pytest.raises(uploads.UploadRefused, match=r"needed more memory than this server gives one \(1,024 MB\)"):
        analysed(upload_functions.allocate, [], (4 * 2**30,))


def test_cpu_time_past_the_ceiling_ends_the_analysis():
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=512, cpu_seconds=1)
    started = time.monotonic()
    with pytest.raises(uploads.UploadRefused, match=r"needed more than 1 s of CPU time"):
        analysed(upload_functions.spin, [], (), limits)
    assert time.monotonic() - started < 10


def test_a_network_estimated_past_the_cpu_cap_is_refused_before_its_analysis_starts():
    """784 → 4096 → 10: a few CPU-seconds to analyse, estimated from its shapes (network_analysis_cost) and refused
    under a cap of 1 s with the estimate, not ended by the kernel's CPU limit after the cap's wait."""
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=1024, cpu_seconds=1)
    with pytest.raises(
        uploads.UploadRefused,
        match=r"Analysing this network would take ~\d+ CPU-seconds on this "
        r"server, over its cap of 1 CPU-seconds: try a smaller network",
    ):
        analysed(symmetry_lab.uploaded_network, [("net.pt", hostile_files.wide_network(4096))], ("max_in",), limits)


def test_a_pair_estimated_past_the_cpu_cap_is_refused_before_its_alignment_starts():
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=1024, cpu_seconds=1)
    pair = [("a.pt", hostile_files.wide_network(4096)), ("b.pt", hostile_files.wide_network(4096, seed=1))]
    with pytest.raises(uploads.UploadRefused, match=r"^Aligning these networks would take ~\d+ CPU-seconds"):
        analysed(align_lab.uploaded_pair, pair, (11, 16, 0, 1), limits)


def test_an_analysis_starts_with_every_labs_computations_imported():
    """Forked from a server that imported them (COMPUTE_PRELOAD): importing the symmetry explorer's would cost an
    analysis about a CPU-second, several seconds of waiting at its share of a core."""
    from symlab.labs import LABS

    experiments = [f"symlab.labs.{lab.name}.experiment" for lab in LABS]
    assert analysed(upload_functions.loaded_modules, [], (experiments,)) == experiments


def test_a_budget_refuses_only_work_estimated_past_it():
    from symlab.specs import settings
    from symlab.specs.tasks import Cost, Rates

    rates, work = Rates(1e9, 1e9, 1e6), Cost(matmul_flops=3e9, elementwise=1e9)  # 4 s at these rates
    settings.check_affordable(work, "Anything")  # no budget: the command line's, a worker's
    with settings.cpu_budget(settings.CpuBudget(5, rates)):
        settings.check_affordable(work, "Within")
    with settings.cpu_budget(settings.CpuBudget(3, rates)), pytest.raises(settings.TooCostly, match="^Past it"):
        settings.check_affordable(work, "Past it")
    settings.check_affordable(work * 100, "Out of the block")


def handoffs() -> set:
    import glob
    import tempfile

    return {*glob.glob("/dev/shm/symlab-upload-*"), *glob.glob(f"{tempfile.gettempdir()}/symlab-upload-*")}


def test_an_analysis_past_its_wall_clock_limit_is_killed_and_leaves_nothing_behind():
    before = handoffs()
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=512, cpu_seconds=30, wall_seconds=1.0)
    with pytest.raises(uploads.UploadRefused, match=r"did not finish within 1 s"):
        analysed(upload_functions.sleep, [("net.pt", b"\0" * 10**6)], (60,), limits)
    assert handoffs() <= before  # the uploads' bytes handed to the analysis are gone with it


def test_a_process_that_dies_is_reported_and_anything_but_data_is_refused():
    with pytest.raises(uploads.UploadRefused, match=r"stopped unexpectedly \(exit code 3\)"):
        analysed(upload_functions.exit_with, [], (3,))
    with pytest.raises(uploads.UploadRefused, match="failed unexpectedly"):
        analysed(upload_functions.not_data, [], ())


def test_analyses_take_turns_and_a_waiting_page_hears_how_many_are_ahead():
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=512, cpu_seconds=30)
    heard, spans = [], []

    def one(index):
        value = analysed(upload_functions.sleep_and_time, [], (1.0,), limits, waiting=heard.append)
        spans.append(value)

    threads = [threading.Thread(target=one, args=(index,)) for index in range(3)]
    for thread in threads:
        thread.start()
        time.sleep(0.2)
    for thread in threads:
        thread.join(60)
    spans.sort()
    assert len(spans) == 3 and all(later[0] >= earlier[1] for earlier, later in zip(spans, spans[1:]))
    assert {1, 2} <= set(heard)


def test_a_page_that_gives_up_stops_its_analysis():
    class MovedOn(Exception):
        pass

    def working(seconds):
        if seconds > 0.5:
            raise MovedOn

    started = time.monotonic()
    with pytest.raises(MovedOn):
        analysed(upload_functions.sleep, [], (60,), working=working)
    assert time.monotonic() - started < 5
    assert uploads.TURNS.busy == (0, 0)


def test_an_analysis_held_to_a_share_of_a_core_gets_that_share():
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=512, cpu_seconds=30, core_share=0.25)
    cpu = analysed(upload_functions.spin_for, [], (3.0,), limits)
    assert 0.25 * 3.0 * 0.6 < cpu < 0.25 * 3.0 * 1.5  # stopped for the rest of every half second
    assert limits.wall_limit == 2 * 30 / 0.25 + 10


def test_a_hosted_server_runs_two_analyses_at_a_time_within_a_share_of_a_core():
    hosted = uploads.AnalysisLimits.from_live(LiveLimits(**HOSTED_DEFAULTS[LiveLimits]))
    assert hosted.concurrent == 2 and hosted.memory_mb <= 2048 and hosted.cpu_seconds <= 60
    assert hosted.core_share <= 0.2 and hosted.wall_limit == 2 * 60 / (0.2 / 2) + 10


def test_a_small_network_is_analysed_at_once_beside_one_browsers_three_large_uploads():
    """The probe's attack: a student uploaded a large network in three tabs, and another student's 2.5 KB network
    had no answer after 500 s. On the hosted limits the three hold one place (the newest), and the small network is
    analysed beside it, at half the uploads' share of a core, within seconds."""
    hosted = uploads.AnalysisLimits.from_live(LiveLimits(**HOSTED_DEFAULTS[LiveLimits]))
    done = threading.Event()
    outcomes: dict[str, object] = {}

    def working(seconds):
        if done.is_set():
            raise uploads.UploadRefused("the test is over")

    def large(name):  # as long as its CPU time allows: a network far larger than any the page takes
        try:
            outcomes[name] = analysed(upload_functions.spin, [], (), hosted, working=working, owner="alice")
        except uploads.UploadRefused as refusal:
            outcomes[name] = refusal

    threads = [threading.Thread(target=large, args=(name,)) for name in ("A1", "A2", "A3")]
    for thread in threads:
        thread.start()
        time.sleep(0.3)
    started = time.monotonic()
    found = analysed(
        symmetry_lab.uploaded_network, [("small.pt", hostile_files.small_network())], ("max_in",), hosted, owner="bob"
    )
    waited = time.monotonic() - started
    done.set()
    for thread in threads:
        thread.join(30)
    print(f"small network analysed in {waited:.1f} s beside the large one")
    assert found.description.startswith("6 → 5 → 3") and waited < 30, waited
    assert [str(outcomes[name]).startswith("replaced by a newer upload") for name in ("A1", "A2")] == [True, True]
    assert str(outcomes["A3"]) == "the test is over" and uploads.TURNS.busy == (0, 0)


def test_a_browsers_newer_upload_replaces_its_older_one_and_browsers_go_in_turn():
    """One browser queued any number of analyses and the rest of the class waited behind them (another student's
    2.5 KB network had no answer after 500 s). Now a browser holds one place: its newer upload replaces the older
    one, stopped where it runs, and another browser waits for at most one analysis of its."""
    limits = uploads.AnalysisLimits(concurrent=1, memory_mb=512, cpu_seconds=60)
    outcomes: dict[str, object] = {}

    def upload(name, owner, function, options):
        try:
            outcomes[name] = analysed(function, [], options, limits, owner=owner)
        except uploads.UploadRefused as refusal:
            outcomes[name] = refusal

    started = time.monotonic()
    asked = [
        ("A1", "alice", upload_functions.sleep, (60.0,)),  # runs, until A2 replaces it
        ("A2", "alice", upload_functions.sleep, (60.0,)),  # queued, until A3 replaces it
        ("B", "bob", upload_functions.sleep_and_time, (0.1,)),
        ("A3", "alice", upload_functions.sleep_and_time, (0.1,)),
    ]
    threads = [threading.Thread(target=upload, args=request) for request in asked]
    for thread in threads:
        thread.start()
        time.sleep(0.3)
    for thread in threads:
        thread.join(60)
    assert time.monotonic() - started < 15  # not 120 s of alice's first two
    for replaced in ("A1", "A2"):
        assert isinstance(outcomes[replaced], uploads.UploadRefused) and "newer upload" in str(outcomes[replaced])
    bob, alice = outcomes["B"], outcomes["A3"]
    assert isinstance(bob, list) and isinstance(alice, list) and bob[1] <= alice[0]  # in the order they asked
    assert uploads.TURNS.busy == (0, 0)
