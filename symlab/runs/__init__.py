"""Background training runs: the registry and its database, the supervisor that starts, cancels, resumes,
restarts and reaps them (each for its owner), the worker process, training one run, Ray as another executor, and
the device a run uses and what its cores do per second."""
