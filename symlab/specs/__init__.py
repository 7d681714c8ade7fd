"""What every layer shares: controls declared once, URL state, results and their one divergence error, the
`Lab` entry, tasks and their cost, what a lab declares for its runs, and the server's settings (every
``SYMLAB_*`` variable)."""
