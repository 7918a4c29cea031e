"""fmlab.environment.free_port: a port nothing listens on, drawn below the OS's range for port 0.

Run: .venv/bin/pytest tests/test_free_port.py -q   (well under 1 s)
"""

import socket

from fmlab import environment
from fmlab.environment import free_port


def _listening(port: int) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_the_port_is_below_the_ephemeral_range_and_can_be_bound(tmp_path, monkeypatch):
    range_file = tmp_path / "ip_local_port_range"
    range_file.write_text("32768\t60999\n")
    monkeypatch.setattr(environment, "EPHEMERAL_RANGE_FILE", range_file)
    ports = {free_port() for _ in range(20)}
    assert all(16384 <= port < 32768 for port in ports), sorted(ports)
    assert len(ports) > 1  # drawn at random, so two workers asking at once rarely get the same one
    _listening(ports.pop()).close()


def test_a_port_in_use_is_never_returned(monkeypatch):
    """The first two draws land on ports that are listened on, the third on a free one: the free one is the answer."""
    held = [_listening(0), _listening(0)]  # two ports taken, wherever the OS put them
    spare = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    spare.bind(("127.0.0.1", 0))
    free = spare.getsockname()[1]
    spare.close()
    draws = iter([s.getsockname()[1] for s in held] + [free])
    monkeypatch.setattr("random.randrange", lambda low, high: next(draws))
    try:
        assert free_port() == free
    finally:
        for s in held:
            s.close()


def test_without_a_range_file_it_falls_back_to_below_49152(tmp_path, monkeypatch):
    monkeypatch.setattr(environment, "EPHEMERAL_RANGE_FILE", tmp_path / "missing")
    assert 49152 - 16384 <= free_port() < 49152
