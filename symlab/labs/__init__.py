"""The labs, in the order the app and ``python -m symlab --help`` list them.

A lab is a package here (its config and experiment, its command line, its page's parameters, its
:class:`~symlab.lab.Lab` entry), a page in ``pages/`` and one line below.
"""

from .align import LAB as ALIGN
from .mnist import LAB as MNIST
from .modes import LAB as MODES
from .symmetry import LAB as SYMMETRY
from .toy import LAB as TOY

LABS = (MODES, TOY, MNIST, SYMMETRY, ALIGN)

