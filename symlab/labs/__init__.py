"""The labs, in the order the app and ``python -m symlab --help`` list them.

A lab is a package here (its config and experiment, its page's parameters, its
:class:`~symlab.specs.lab.Lab` entry), a page in ``views/``, its commands in ``symlab/cli/`` and one line below.
Listing the labs imports none of their computations: each entry names its parts as strings.
"""

from .align import LAB as ALIGN
from .methods import LAB as METHODS
from .mnist import LAB as MNIST
from .modes import LAB as MODES
from .symmetry import LAB as SYMMETRY
from .toy import LAB as TOY

LABS = (MODES, TOY, MNIST, SYMMETRY, ALIGN, METHODS)


def run_kinds() -> dict:
    """Lab name -> its RunKind, for the labs that keep runs (what a run registry is handed)."""
    return {lab.name: lab.run_kind() for lab in LABS if lab.runs}


def computation_modules() -> list[str]:
    """Each lab's modules that hold or import its computations (its page parameters', tasks', run kind's and
    results'): what a server imports ahead of its visitors, and the forked processes (workers, an upload's analysis)
    inherit. The page parameters alone import no computation (the command line parses without numpy)."""
    named: list[str] = []
    for lab in LABS:
        for entry in (lab.params, lab.tasks, lab.runs, *lab.results):
            module = entry.partition(":")[0]
            if module and module not in named:
                named.append(module)
    return named
