"""Background training runs: the registry and its database, the supervisor that starts, cancels, resumes and
reaps them, the worker process, training one run, Ray as another executor, and the device a run uses."""
