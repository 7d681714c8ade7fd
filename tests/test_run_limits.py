"""What keeps a shared server's background runs in bounds, without starting one: the estimate of a run's CPU time
and the cap on it, a stop asked for during an evaluation, registry writes waiting out a database's outage, the
lecturer's key and the variables of the caps."""

import pytest
from counting_lab import COUNTING, CountConfig

from symlab.labs.mnist import LAB, params
from symlab.labs.mnist import experiment as mnist
from symlab.labs.mnist.experiment import MnistConfig
from symlab.lib import mnist_data
from symlab.runs import execution
from symlab.runs.device import device_name, machine_rates
from symlab.runs.registry import Registry, RegistryError
from symlab.specs import controls, settings, urlstate
from symlab.specs.run_kind import FAILED, FINISHED, RUNNING
from symlab.specs.settings import Hosting, RunLimits, SettingsError, Work
from symlab.specs.tasks import Rates

# What the hostile visitor's link asks: a 1024-1024 net, evaluated with 100 samples after each of 1200 one-image
# epochs in batches of 1 (within every cap a run had before its CPU time was estimated).
HOSTILE_LINK = dict(hidden="1024", depth="2", subset="1", epochs="1200", samples="100", every="1", batch="1")
HOSTED = Hosting.defaults(hosted=True)
SLOW_CORE = Rates(matmul_flops=3e10, elementwise=3e9, normals=1e8)  # a third of this machine's speed, or less


def page_config(values) -> MnistConfig:
    """The config the MNIST page launches for these link values, as the page reads them."""
    parsed, _ = urlstate.parse_query(values, LAB.page_params(HOSTED))
    return MnistConfig(**controls.config_values(MnistConfig, parsed, params.PAGE_FIELDS))


def seconds(**changed) -> float:
    """The estimated CPU-seconds of a small run with ``changed`` settings, on a slow core."""
    fields = {**dict(hidden=256, train_subset=2000, epochs=4, samples=10), **changed}
    return MnistConfig(**fields).work().seconds(SLOW_CORE)


def test_the_estimate_grows_with_everything_a_run_computes():
    assert seconds(samples=100) > 5 * seconds()  # evaluation dominates here
    assert seconds(eval_every=1) > seconds(eval_every=2) > seconds(eval_every=4)
    assert seconds(batch_size=1) > 2 * seconds(batch_size=128)  # the same passes, more steps
    assert seconds(depth=2) > seconds() and seconds(hidden=512) > seconds()
    assert seconds(epochs=8) > seconds() and seconds(train_subset=4000) > seconds()
    assert seconds(method="sgm", K=64) > seconds(method="sgm", K=4)
    # A subset of one image still costs its epochs: a table of normals and an evaluation after each.
    assert seconds(train_subset=1, epochs=100) > 50 * seconds(train_subset=1, epochs=1)


def test_the_hostile_link_is_refused_for_its_evaluations_and_every_preset_passes():
    hostile = page_config(HOSTILE_LINK)
    assert (hostile.hidden, hostile.depth, hostile.epochs, hostile.samples) == (1024, 2, 1200, 100)
    HOSTED.runs.check(hostile.work())  # within the caps a run had before: width, depth, passes
    rates = machine_rates()
    with pytest.raises(
        ValueError,
        match=r"^evaluating 100 samples after each of 1200 epochs: ~\d+ CPU-hours "
        r"estimated, over this server's cap of 20 CPU-minutes per run$",
    ):
        HOSTED.runs.check(hostile.work(), rates)
    for name in params.PRESETS:  # on this machine, and on one three times slower
        config = page_config(params.PRESETS.state(name, LAB.page_params(HOSTED)))
        for speed in (rates, SLOW_CORE):
            HOSTED.runs.check(config.work(), speed)
            assert config.work().seconds(speed) < 60 * HOSTED.runs.max_run_minutes, name


def test_a_refusal_names_the_part_that_costs_most():
    limits = RunLimits(max_run_minutes=1)
    training = MnistConfig(hidden=1024, train_subset=60_000, epochs=20, samples=1, eval_every=20, batch_size=1)
    with pytest.raises(ValueError, match=r"^training 20 epochs of 60000 images in batches of 1: ~\d+ CPU-hours"):
        limits.check(training.work(), SLOW_CORE)
    limits.check(Work(width=8, depth=1, epochs=1), SLOW_CORE)  # a lab that counts nothing is not refused for it


class Stop(Exception):
    pass


def test_a_stop_asked_for_during_the_evaluation_ends_it_at_the_next_check():
    """Cancel waited for a whole evaluation (about a minute for a wide net and 100 samples): the hook that stops
    training is now called between the evaluation's weight draws and passes, and between the diagnoses' parts."""
    config = MnistConfig(hidden=16, train_subset=300, epochs=1, samples=5, device="cpu")
    device = mnist.resolve_device("cpu")
    data = mnist.prepare_tensors(mnist_data.load_mnist(), config, device)
    calls = []
    mnist.MnistTrainer(config, data, device).train_epoch(lambda step, steps: calls.append((step, steps)))
    steps = 3  # 300 images in batches of 128
    assert calls[:steps] == [(1, 3), (2, 3), (3, 3)] and set(calls[steps:]) == {(3, 3)}
    # Then 5 draws, 5 samples × 5 chunks of 2 000 test images, 2 between the diagnoses' parts.
    assert len(calls) == steps + 5 + 25 + 2
    for stop_at in (steps + 2, steps + 20, len(calls)):  # a draw, a pass, the diagnosis
        trainer, seen = mnist.MnistTrainer(config, data, device), []

        def on_step(step, total):
            seen.append(step)
            if len(seen) == stop_at:
                raise Stop()

        with pytest.raises(Stop):
            trainer.train_epoch(on_step)
        assert trainer.epoch == 0 and not trainer.history


class Flaky(Registry):
    """A registry whose database is away for its first ``outage`` writes of each kind, or for good."""

    def __init__(self, *args, outage: int, transient: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.outage, self.transient, self.failed = outage, transient, {}

    def _away(self, what: str) -> None:
        if self.failed.get(what, 0) < self.outage:
            self.failed[what] = self.failed.get(what, 0) + 1
            raise RegistryError("the database is down", public="down", transient=self.transient)

    def add_metrics(self, run_id, metrics):
        self._away("metrics")
        super().add_metrics(run_id, metrics)

    def heartbeat(self, run_id, epoch, progress):
        self._away("heartbeat")
        return super().heartbeat(run_id, epoch, progress)


def flaky(tmp_path, **options) -> tuple[Registry, int]:
    registry = Flaky({"counting": COUNTING}, tmp_path / "runs", outage=options.pop("outage"), **options)
    return registry, registry.create("counting", CountConfig(epochs=3), "cpu", status=RUNNING)


def test_registry_writes_wait_out_an_outage_and_the_run_finishes(tmp_path, monkeypatch):
    pauses = []
    monkeypatch.setattr(execution.time, "sleep", pauses.append)  # the registry's retries pause through it
    registry, run_id = flaky(tmp_path, outage=3)
    final = execution.execute(registry, run_id, outage_seconds=60)
    assert final.status == FINISHED and final.result == {"counted": 3, "device_name": device_name("cpu")}
    assert [m["epoch"] for m in registry.metrics([run_id])[run_id]] == [1, 2, 3]  # none lost
    assert registry.failed == {"metrics": 3, "heartbeat": 3} and pauses[:3] == [0.5, 1.0, 2.0]


def test_an_outage_longer_than_the_limit_or_a_lasting_error_is_not_waited_out(tmp_path, monkeypatch):
    pauses = []
    monkeypatch.setattr(execution.time, "sleep", pauses.append)
    registry, run_id = flaky(tmp_path / "long", outage=100)
    final = execution.execute(registry, run_id, outage_seconds=10)
    assert final.status == FAILED and "RegistryError: down" in final.message  # it came back for the verdict
    assert pauses == [0.5, 1.0, 2.0, 4.0]  # 7.5 s; the next pause would pass the limit
    registry, run_id = flaky(tmp_path / "broken", outage=1, transient=False)  # a full disk, a wrong password
    pauses.clear()
    assert execution.execute(registry, run_id, outage_seconds=10).status == FAILED and not pauses


def test_the_lecturer_key_and_the_caps_variables(monkeypatch):
    monkeypatch.delenv(settings.LECTURER_KEY_ENV, raising=False)
    assert settings.lecturer_key() is None and not settings.is_lecturer_key("") and not settings.is_lecturer_key("x")
    monkeypatch.setenv(settings.LECTURER_KEY_ENV, "correct horse")
    assert settings.is_lecturer_key("correct horse") and not settings.is_lecturer_key("correct hors")
    assert not settings.is_lecturer_key("") and not settings.is_lecturer_key(None)
    hosted = RunLimits.from_env({"SYMLAB_HOSTED": "1"})
    assert (hosted.max_runs_per_browser, hosted.max_runs_per_hour, hosted.max_run_minutes) == (4, 30, 20)
    assert RunLimits.from_env({"SYMLAB_MAX_RUNS_PER_BROWSER": "2"}).max_runs_per_browser == 2
    with pytest.raises(SettingsError, match="SYMLAB_MAX_RUNS_PER_SESSION is now SYMLAB_MAX_RUNS_PER_BROWSER"):
        RunLimits.from_env({"SYMLAB_MAX_RUNS_PER_SESSION": "4"})
    assert "≤ 20 estimated CPU-minutes a run" in hosted.describe() and "4 launches" in hosted.describe()
