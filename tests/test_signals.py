"""A page process's SIGTERM (symlab/serving/signals.py): the server stops as uvicorn stops it, and the process then
exits as Python does (tests/test_replicas.py stops a real one)."""

import signal

from symlab.serving.signals import exit_normally_on_sigterm


class Server:
    """What uvicorn's ``Server`` offers a handler: the flags its main loop reads."""

    def __init__(self):
        self.should_exit = self.force_exit = False
        self.captured = []

    def handle_exit(self, signum, frame):  # uvicorn's: notes the signal, to raise it again once stopped
        self.captured.append(signum)
        self.should_exit = True


def test_the_servers_handler_is_replaced_by_one_that_stops_it_without_raising_the_signal_again():
    server = Server()
    before = signal.signal(signal.SIGTERM, server.handle_exit)
    try:
        assert exit_normally_on_sigterm()
        handler = signal.getsignal(signal.SIGTERM)
        handler(signal.SIGTERM, None)
        assert server.should_exit and not server.force_exit and server.captured == []
        handler(signal.SIGTERM, None)  # asked again: stop without waiting for the connections
        assert server.force_exit
    finally:
        signal.signal(signal.SIGTERM, before)


def test_outside_a_server_nothing_changes():
    before = signal.getsignal(signal.SIGTERM)
    assert not exit_normally_on_sigterm() and signal.getsignal(signal.SIGTERM) is before
