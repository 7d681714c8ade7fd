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
    """Each lab's page-parameter module, which imports its computations: what a server imports ahead of its
    visitors, and its worker processes before their first task."""
    return [lab.params.partition(":")[0] for lab in LABS]
