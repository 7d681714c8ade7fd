"""Hostile input: every page's query parameters and every CLI option, fed garbage.

Nothing may raise. A page renders with valid control values and names each malformed parameter
in its "adjusted" notice; the CLI exits with a one-line error (argparse's usage error, status 2,
or its own message, status 1 for runtime errors), never a traceback. The cases are generated from
each lab's URL parameters as the registry (``symlab.labs.LABS``) derives them from the
labs' declarations, and from the CLI's parser, so new parameters and options are covered
without editing this file. Besides the fixed hostile cases, Hypothesis draws random mixes of junk,
numbers, hostile and valid values: it shrinks a failure to a small case and replays it first on the next
run (the ``ci`` profile in tests/conftest.py draws the same examples every run instead).
Hostile uploaded files (a pickle with code, truncated, convolutional, …) are generated and fed to the
readers and both CLIs in tests/test_weights.py, and to the pages in tests/test_browser.py.
"""

import argparse
import functools
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample
from streamlit.testing.v1 import AppTest

from symlab import cli
from symlab.labs import LABS as REGISTRY
from symlab.labs.align import experiment as align_lab
from symlab.labs.modes import experiment as modes
from symlab.labs.symmetry import experiment as symmetry_lab
from symlab.lib import mnist_data, two_relu
from symlab.runs import execution
from symlab.serving import proxy, shared_results, warmup
from symlab.specs.urlstate import Param, encode_query, parse_query
from views.common import binding, computing

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
NOTICE = "Some settings in the link were adjusted"
RESERVED = ("embed", "embed_options")  # Streamlit's own query parameters
BOOL_WORDS = ("1", "true", "yes", "on", "0", "false", "no", "off")
QUERY_LIMIT = 400_000  # Streamlit ignores a query string over 524 288 characters; stay well below


# --- the pages and their parameters -----------------------------------------------------------


class Page:
    def __init__(self, name: str, path: str | None, title: str, specs: tuple):
        self.name, self.path, self.title, self.specs = name, path, title, specs
        self.by_name = {spec.name: spec for spec in specs}


def lab_page(lab) -> Page:
    """A lab's page as the registry declares it: its URL parameters derived from the lab's declarations, with
    this server's caps, plus the presentation-mode parameter that binding.start_page adds to every page."""
    return Page(lab.name, lab.page, lab.title, (*lab.page_params(binding.server_settings()), binding.PRESENT))


LABS = [lab_page(lab) for lab in REGISTRY]
HOME = Page("home", None, "SymLab", ())
ALL_NAMES = sorted({spec.name for page in LABS for spec in page.specs})


def valid_text(spec: Param) -> str:
    return encode_query({spec.name: spec.default}, [spec])[spec.name]


# --- hostile values ---------------------------------------------------------------------------

# kind -> value, or a function of the spec for values that depend on it. A list is the key
# repeated in the URL (?a=1&a=2): the last one counts.
HOSTILE = {
    "nan": "nan",
    "NaN": "NaN",
    "inf": "inf",
    "-inf": "-inf",
    "1e308": "1e308",
    "-1e308": "-1e308",
    "huge-int": "9" * 400,
    "negative": "-7",
    "negative-fraction": "-0.5",
    "empty": "",
    "blank": "   ",
    "bool-word": "true",
    "fraction": "1.5",
    "number": "3",
    "hex": "0x10",
    "list": "1,,nan,2",
    "unicode": "\u202e\u200bσ💥ﬀe\u0301１２",
    "control": "\x00\x07\x1b[31m\r\n\t\x7f",
    "markdown": "`[click](https://example.com)` **x** $\\alpha$ <b>",
    "repeated-last-bad": lambda spec: [valid_text(spec), "junk"],
    "repeated-last-good": lambda spec: ["junk", valid_text(spec)],
}
LONG = "9" * 100_000
UNKNOWN = {
    "bogus": "1",
    "ALPHA": "2",
    "x" * 2000: "y",
    "a\x00b\u202e": "z",
    "💥": "1",
    "alpha[]": "1",
    "embed_options": "show_toolbar",
}
JUNK = (
    "abcxyzXYZ0123456789.,-+eE _%&=#?/\\`*[]()$<>\"'~|;:!@^{}"
    "\x00\x01\x1b\t\n\r\x7f\u00a0\u200b\u202e\u2028σ٣１💥ﬀ\u0301"
)


def value_for(kind: str, spec: Param):
    value = HOSTILE[kind]
    return value(spec) if callable(value) else value


# --- random mixes (Hypothesis strategies) ----------------------------------------------------

# Numbers as a link spells them: a fraction of 10^-4 … 10^7, with 0 to 4 decimals.
FORMATTED_FLOATS = st.builds(
    lambda x, power, digits: f"{x * 10.0**power:.{digits}f}", st.floats(-1, 1), st.integers(-4, 7), st.integers(0, 4)
)


def raw_values(spec: Param):
    """A value for ``spec``'s key: junk text, a number, a big int, a hostile or a valid value, or the key
    repeated (a list: a hostile repeated-key kind, or two or three of the others)."""
    single = st.one_of(
        st.text(JUNK, max_size=24),
        FORMATTED_FLOATS,
        st.integers().map(str),
        st.sampled_from([value for value in HOSTILE.values() if isinstance(value, str)]),
        st.sampled_from(spec.choices) if spec.kind == "choice" else st.just(valid_text(spec)),
    )
    repeated = st.sampled_from([kind for kind, value in HOSTILE.items() if callable(value)])
    return st.one_of(single, repeated.map(lambda kind: value_for(kind, spec)), st.lists(single, min_size=2, max_size=3))


def page_queries(page: Page):
    """A query for ``page``: each of its keys absent or with a raw value, and up to two unknown junk keys."""
    known = st.fixed_dictionaries({}, optional={spec.name: raw_values(spec) for spec in page.specs})
    unknown = st.dictionaries(st.text(JUNK, min_size=1, max_size=12), st.text(JUNK, min_size=5, max_size=5), max_size=2)
    return st.builds(lambda known, unknown: {**known, **unknown}, known, unknown)


def groups(names, size):
    return [names[i : i + size] for i in range(0, len(names), size)]


def page_cases():
    """(page, query, whether the page waits for its computations: where every value is clamped to its largest)."""
    for page in LABS:
        for kind in HOSTILE:
            query = {spec.name: value_for(kind, spec) for spec in page.specs}
            yield pytest.param(page, query, kind == WAITS_FOR_RESULTS, id=f"{page.name}-{kind}")
        for i, names in enumerate(groups([spec.name for spec in page.specs], QUERY_LIMIT // len(LONG))):
            yield pytest.param(page, dict.fromkeys(names, LONG), False, id=f"{page.name}-100kB-{i}")
        yield pytest.param(page, UNKNOWN, False, id=f"{page.name}-unknown-keys")
    # Home reads no parameters: a lab's link pasted there must not hurt either. (The spec given to
    # value_for only shapes the repeated-key kinds.)
    for kind in HOSTILE:
        query = {name: value_for(kind, Param(name, "bool", False)) for name in ALL_NAMES}
        yield pytest.param(HOME, query, False, id=f"home-{kind}")
    yield pytest.param(HOME, {**UNKNOWN, "alpha": LONG}, False, id="home-unknown-keys-100kB")


# --- what a page must make of them ------------------------------------------------------------


def last(raw) -> str:
    return (raw[-1] if raw else "") if isinstance(raw, list) else raw


def malformed(spec: Param, raw) -> bool:
    """Whether ``raw`` is not a valid value of ``spec`` as given (written independently of the parser)."""
    raw = last(raw)
    if spec.kind == "bool":
        return raw.strip().lower() not in BOOL_WORDS
    if spec.kind == "choice":
        return raw not in spec.choices
    if spec.kind == "tokens":
        items = [part.strip() for part in raw.split(",") if part.strip()]
        return len(items) > spec.max_items or not all(re.fullmatch(r"[A-Za-z0-9_-]{1,32}", item) for item in items)
    if spec.kind == "floats":
        if not raw.strip() and spec.default == "":
            return False
        try:
            numbers = [float(part) for part in raw.split(",") if part.strip()]
        except ValueError:
            return True
        return (
            not numbers
            or len(numbers) > spec.max_items
            or not all(math.isfinite(n) and spec.low <= n <= spec.high for n in numbers)
        )
    try:
        number = float(raw)
    except ValueError:
        return True
    if not (math.isfinite(number) and spec.low <= number <= spec.high):
        return True
    if spec.kind == "int" and number != int(number):
        return True
    steps = (number - spec.low) / spec.step if spec.step else 0.0
    return abs(steps - round(steps)) * (spec.step or 0.0) > 1e-9


def names_a_run(spec: Param, raw) -> bool:
    """Whether ``raw`` names runs by token: the fuzzed pages have none, so the page leaves them out with a notice."""
    return spec.kind == "tokens" and any(part.strip() for part in last(raw).split(","))


def assert_valid_value(spec: Param, value):
    if spec.kind == "bool":
        assert isinstance(value, bool), (spec.name, value)
    elif spec.kind == "choice":
        assert value in spec.choices, (spec.name, value)
    elif spec.kind in ("floats", "tokens"):
        assert isinstance(value, str) and parse_query({spec.name: value}, [spec])[1] == [], (spec.name, value)
    else:
        assert type(value) is (int if spec.kind == "int" else float), (spec.name, value)
        assert math.isfinite(value) and spec.low <= value <= spec.high, (spec.name, value)


@pytest.fixture(scope="module")
def runs_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz-runs")


# Where a link's values are all clamped to their largest (``inf``), the page waits for what they compute and draws
# it: the heaviest state a link can ask for (the alignment lab's, 25 s on a quiet two-core machine). Every other
# hostile link is judged on what the page makes of it; its computations, if not stored yet, are left waiting.
WAITS_FOR_RESULTS = "inf"
HEAVIEST_PAGE_SECONDS = 300


def check_page(page: Page, query: dict, runs_dir, wait_for_results: bool = False) -> None:
    # A context, not the monkeypatch fixture: a Hypothesis test runs many examples in one function scope.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SYMLAB_RUNS_DIR", str(runs_dir))
        if not wait_for_results:  # the waiting panel at once (tests/conftest.py makes pages wait under AppTest)
            patch.setattr(computing, "WAIT_IN_RUN_SECONDS", 0.0)
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=HEAVIEST_PAGE_SECONDS if wait_for_results else 60)
        if page.path:
            at.switch_page(page.path)
        at.query_params.update(query)
        try:
            at.run()
        finally:
            leave_computations(at)
    assert not at.exception, "\n".join(f"{e.message}\n{''.join(e.stack_trace)}" for e in at.exception)
    assert any(title.value.startswith(page.title) for title in at.title), [title.value for title in at.title]
    notices = [w.value for w in at.warning if NOTICE in w.value]
    if page is HOME:
        assert not notices
        return

    bad = [
        name
        for name, raw in query.items()
        if name in page.by_name and (malformed(page.by_name[name], raw) or names_a_run(page.by_name[name], raw))
    ]
    unknown = [name for name in query if name not in page.by_name and name not in RESERVED]
    if bad or unknown:
        assert len(notices) == 1, f"no notice for malformed {bad} / unknown {unknown}"
        missing = [name for name in bad if f"`{name}=" not in notices[0] and f"`{name}`" not in notices[0]]
        assert not missing, f"the notice does not name {missing}: {notices[0]}"
        assert not unknown or "Unknown parameter" in notices[0]
        # Nothing from the link ends a notice's `code span` (Markdown would follow) or garbles the line.
        lines = notices[0].split("\n")
        assert all(line.count("`") == 2 for line in lines if line.startswith("- ")), notices[0]
        assert not re.search(r"[\x00-\x09\x0b-\x1f\x7f\x85\u2028\u2029\u202e]", notices[0]), notices[0]
    else:
        assert not notices
    for spec in page.specs:
        assert_valid_value(spec, at.session_state[binding.widget_key(page.name, spec.name)])
    # The link the page writes back is clean: opening it shows no notice.
    assert parse_query(at.query_params, page.specs)[1] == []


def leave_computations(at: AppTest) -> None:
    """The session leaves what it asked the workers for, as a closed tab does: a computation not started is dropped
    (one started finishes, and is stored), so the hostile links' computations do not queue up behind the tests."""
    state = at.session_state
    if "ui.job" in state and "ui.waiter" in state:
        shared_results.shared().release(state["ui.job"], state["ui.waiter"])


@pytest.mark.parametrize("page, query, wait_for_results", page_cases())
def test_hostile_query_parameters(page, query, wait_for_results, runs_dir):
    check_page(page, query, runs_dir, wait_for_results)


# AppTest runs a page in 0.5-2 s: a few examples per page, and no deadline.
@pytest.mark.parametrize("page", [pytest.param(page, id=page.name) for page in LABS])
@settings(max_examples=4, deadline=None)
@given(data=st.data())
def test_hostile_query_parameters_at_random(page, runs_dir, data):
    check_page(page, data.draw(page_queries(page), label="query"), runs_dir)


def test_random_queries_reach_the_hostile_shapes():
    """The random page queries include each shape the fixed cases cover (else the random page test would
    quietly test less)."""
    page = next(page for page in LABS if any(spec.kind == "choice" for spec in page.specs))
    shapes = {
        "a repeated key": lambda query: any(isinstance(raw, list) for raw in query.values()),
        "an unknown key": lambda query: any(name not in page.by_name for name in query),
        "an absent key beside a given one": lambda query: 0 < len(query.keys() & page.by_name) < len(page.specs),
        "a non-finite number": lambda query: any(raw in ("nan", "inf", "-inf") for raw in query.values()),
        "a control or bidi character": lambda query: any(
            re.search(r"[\x00-\x1f\x7f\u202e]", str(raw)) for raw in query.values()
        ),
        "a valid choice": lambda query: any(
            spec.kind == "choice" and query.get(spec.name) in spec.choices for spec in page.specs
        ),
    }
    for shape, has_it in shapes.items():
        try:  # generation only: finding one is the point, not a minimal one
            # Derandomised: the same draws every run (a shape a run's random draws missed failed now and then).
            find(
                page_queries(page), has_it, settings=settings(database=None, phases=[Phase.generate], derandomize=True)
            )
        except NoSuchExample:
            pytest.fail(f"no random query has {shape}")


def parser_cases():
    """Every page parameter against every hostile value, in the parser alone."""
    for page in LABS:
        for spec in page.specs:
            values = [value_for(kind, spec) for kind in HOSTILE] + [LONG, "x" * 100_000]
            yield pytest.param(spec, values, id=f"{page.name}-{spec.name}")


def check_parsed(spec: Param, raw) -> None:
    parsed, notices = parse_query({spec.name: raw}, [spec])
    assert_valid_value(spec, parsed[spec.name])
    assert bool(notices) == malformed(spec, raw), (raw, notices)
    assert all(len(notice) < 300 for notice in notices)
    assert parse_query(encode_query(parsed, [spec]), [spec]) == (parsed, [])


@pytest.mark.parametrize("spec, values", parser_cases())
def test_parser_alone_fixes_every_value(spec, values):
    for raw in values:
        check_parsed(spec, raw)


@pytest.mark.parametrize(
    "spec", [pytest.param(spec, id=f"{page.name}-{spec.name}") for page in LABS for spec in page.specs]
)
@settings(max_examples=100)
@given(data=st.data())
def test_parser_alone_fixes_any_value(spec, data):
    check_parsed(spec, data.draw(raw_values(spec), label="raw"))


@pytest.mark.parametrize(
    "spec", [Param("n", "int", 0), Param("x", "float", 0.0), Param("xs", "floats", ""), Param("xs", "floats", "1", 0.0)]
)
def test_parameters_without_bounds_still_never_raise(spec):
    for kind in HOSTILE:
        raw = value_for(kind, spec)
        parsed, _ = parse_query({spec.name: raw}, [spec])
        if spec.kind != "floats":
            assert math.isfinite(parsed[spec.name]), raw
        assert parse_query(encode_query(parsed, [spec]), [spec]) == (parsed, [])


# --- the CLI ----------------------------------------------------------------------------------

# The URL's numbers and words, a 100 kB number, and unicode and control strings of its own (no NUL,
# which a process's arguments cannot carry).
CLI_SHARED = "nan NaN inf -inf 1e308 -1e308 huge-int negative negative-fraction empty bool-word fraction number".split()
CLI_HOSTILE = {
    **{kind: HOSTILE[kind] for kind in CLI_SHARED},
    "100kB": LONG,
    "unicode": "\u202e💥ﬀ١٢",
    "control": "\x1b[31m\r\n\x07",
}
# The hostile values that a kind of option may accept: a run then starts (the sentinel below
# stops it). All others must be refused with a message.
MAY_BE_VALID = {
    "int": {"3"},
    "float": {"1e308", "1.5", "3"},
    "choice": set(),
    "text": set(),
    "path": set(CLI_HOSTILE.values()),
}


class Accepted(Exception):
    """Raised where a lab would start computing: the arguments were accepted."""


def subcommands(parser) -> dict:
    """A parser's subcommands by name ({} for none)."""
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return actions[0].choices if actions else {}


def cli_options():
    """(lab id, the words that select it, its options taking a value) for every lab, and for every
    part of a lab with parts: ``symmetry perceptrons`` is "symmetry-perceptrons"."""
    for lab, subparser in subcommands(cli.build_parser()).items():
        parts = subcommands(subparser) or {None: subparser}
        for part, partparser in parts.items():
            yield (
                lab if part is None else f"{lab}-{part}",
                [lab] if part is None else [lab, part],
                [action for action in partparser._actions if action.option_strings and action.nargs != 0],
            )


def option_kind(action) -> str:
    if action.choices is not None:
        return "choice"
    if action.type is None:
        return "path" if action.dest.endswith("_dir") else "text"
    declared = getattr(action.type, "kind", None)  # a flag derived from a declaration (symlab.specs.controls)
    if declared:
        return declared
    return "int" if "int" in getattr(action.type, "__qualname__", "") else "float"


def base_args(lab: str, dest: str, runs_dir) -> list[str]:
    """The other arguments a case needs: required ones, --table for the table's options, and a
    private runs directory."""
    args = []
    if lab == "modes" and dest != "sigma":
        args += ["--sigma", "1"]
    if lab == "toy" and dest in ("alphas", "seeds"):
        args += ["--table"]
    if lab in ("mnist", "mnist-sweep") and dest != "runs_dir":
        args += ["--runs-dir", str(runs_dir)]
    return args


# Known bugs, strict: such a case fails the run once the bug is fixed, and its entry goes.
def cli_cases():
    for lab, words, actions in cli_options():
        for action in actions:
            option, kind = action.option_strings[-1], option_kind(action)
            for name, value in CLI_HOSTILE.items():
                yield pytest.param(
                    lab,
                    words,
                    action.dest,
                    [f"{option}={value}"],
                    value in MAY_BE_VALID[kind],
                    id=f"{lab}{option}-{name}",
                )
            yield pytest.param(
                lab, words, action.dest, [f"{option}=1", f"{option}=nan"], kind == "path", id=f"{lab}{option}-repeated"
            )
            yield pytest.param(lab, words, action.dest, [option], False, id=f"{lab}{option}-missing-value")
        for name in ("nan", "-inf", "huge-int", "empty", "control"):  # every option at once
            args = [f"{a.option_strings[-1]}={CLI_HOSTILE[name]}" for a in actions]
            may_run = all(CLI_HOSTILE[name] in MAY_BE_VALID[option_kind(a)] for a in actions)
            yield pytest.param(lab, words, None, args, may_run, id=f"{lab}-all-{name}")
        yield pytest.param(lab, words, None, ["--bogus", "1"], False, id=f"{lab}-unknown-option")
    for lab, parts in subcommands(cli.build_parser()).items():  # a lab with parts, without a good one
        if subcommands(parts):
            for name, args in (
                ("no-part", []),
                ("unknown-part", ["bogus"]),
                ("hostile-part", [CLI_HOSTILE["control"]]),
                ("option-before-part", ["--json"]),
            ):
                yield pytest.param(lab, [lab], None, args, False, id=f"{lab}-{name}")


_load_mnist = functools.lru_cache(maxsize=4)(mnist_data.load_mnist)  # the shipped copy: read once, not per case


@pytest.fixture
def sentinels(monkeypatch, tmp_path):
    """Nothing starts computing (Accepted instead), and nothing is written outside tmp_path."""

    def accepted(*args, **kwargs):
        raise Accepted()

    def validated_then_accepted(config, *args, **kwargs):
        config.validate()  # as these do first: values the CLI passes on unchecked must be refused there
        raise Accepted()

    for module, name in (
        (modes, "fit_exact"),
        (modes, "fit_monte_carlo"),
        (two_relu, "train_runs"),
        (execution, "execute"),
    ):
        monkeypatch.setattr(module, name, accepted)
    for name in ("train_perceptrons", "train_mlps", "mode_proximity", "posterior_quality"):
        monkeypatch.setattr(symmetry_lab, name, validated_then_accepted)
    monkeypatch.setattr(align_lab, "train_pair", validated_then_accepted)
    # symlab serve: its arguments checked (the class server built: its address, ports, HAProxy's own check of its
    # configuration), then nothing started; symlab warm: nothing computed.
    monkeypatch.setattr(proxy.ClassServer, "start", accepted)
    monkeypatch.setattr(warmup, "warm_store", accepted)
    monkeypatch.setattr(mnist_data, "load_mnist", _load_mnist)
    monkeypatch.setenv("SYMLAB_RUNS_DIR", str(tmp_path / "env-runs"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_one_line_error(err: str):
    assert "Traceback" not in err and "Warning" not in err, err[-2000:]
    lines = err.strip().splitlines()
    errors = [line for line in lines if ": error: " in line]
    assert len(errors) == 1 and lines[-1] == errors[0], err[-2000:]
    # argparse names the lab, or the lab and its part ("python -m symlab symmetry perceptrons: error:");
    # errors raised in a run name the lab.
    assert re.match(r"python -m symlab( [\w-]+){0,2}: error: \S", errors[0]), errors[0][:300]
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", err), "raw control characters on stderr"


@pytest.mark.parametrize("lab, words, dest, args, may_run", cli_cases())
def test_hostile_cli_arguments(lab, words, dest, args, may_run, sentinels, capsys):
    argv = [*words, *base_args(lab, dest, sentinels / "runs"), *args]
    try:  # any other exception fails the test, with its traceback
        status = cli.main(argv)
    except SystemExit as exit_:
        status = exit_.code
    except Accepted:
        assert may_run, f"{args[-1][:60]!r} was accepted: a run would start"
        return
    out, err = capsys.readouterr()
    assert "Traceback" not in out
    if status == 0:
        assert may_run, "exit status 0 for a hostile value"
        return
    assert status in (1, 2)
    assert_one_line_error(err)


@pytest.mark.parametrize(
    "args",
    [
        ["modes", "--sigma", "nan"],
        ["modes", "--sigma", "1", "--dim", "9" * 400],  # was: OverflowError
        ["modes", "--sigma", "1e-300"],  # was: RuntimeWarnings and NaN results
        ["toy", "--steps", "9" * 400, "--json"],  # was: a run of 10^400 steps
        ["mnist", "--resume", "5"],  # was: KeyError
        ["mnist-data", "--data-dir", "x" * 5000],  # was: OSError
        ["mnist-sweep", "--methods", "\x1b[31m"],
        ["symmetry", "proximity", "--widths", "2," + "9" * 400],
        ["symmetry"],
    ],
    ids=[
        "modes-sigma-nan",
        "modes-dim-huge",
        "modes-sigma-tiny",
        "toy-steps-huge",
        "mnist-resume-missing",
        "mnist-data-long-dir",
        "mnist-sweep-methods-escape",
        "symmetry-widths-huge",
        "symmetry-no-part",
    ],
)
def test_real_process_prints_no_traceback(args, tmp_path):
    if args[0].startswith("mnist") and args[0] != "mnist-data":
        args = [*args, "--runs-dir", str(tmp_path / "runs")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SYMLAB_RUNS_DIR": str(tmp_path / "runs")}
    result = subprocess.run(
        [sys.executable, "-m", "symlab", *args], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env
    )
    assert result.returncode in (1, 2), (result.returncode, result.stdout[-500:], result.stderr[-2000:])
    assert "Traceback" not in result.stdout
    assert_one_line_error(result.stderr)
