"""The real server: answers the openai client (streaming too), survives load, and is always stopped.

Each test that needs a running server starts `transformers serve` as a child process (6-9 CPU s each on 2 cores, so
the tests share what one server can show); the process must be gone afterwards."""

import os
import signal
import socket

import pytest

from fmlab.serve import export, loadtest, server

pytestmark = pytest.mark.slow  # each test starts `transformers serve`


def gone(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_server_answers_a_real_client_refuses_a_prompt_too_long_and_leaves_no_process(tiny_run):
    with server.LocalServer(tiny_run["trained"]) as srv:
        pid = srv.process.pid
        reply = srv.client().completions.create(model=srv.model, prompt="To be, or not", max_tokens=8)
        assert reply.usage.completion_tokens >= 1 and reply.choices[0].text
        pieces = list(srv.stream("To be, or not", max_tokens=8))
        assert 1 <= len(pieces) <= 8 and "".join(pieces)
        level = loadtest.run_level(srv, ["To be, or not", "KING HENRY."], concurrency=4, requests=8, max_tokens=8)
        assert len(level.ok) == 8 and not level.errors
        assert all(t.ttft_s <= t.latency_s for t in level.ok)
        with pytest.raises(server.PromptTooLong, match="context of 128 tokens"):
            srv.complete("word " * 200, max_tokens=16)
        with pytest.raises(server.PromptTooLong):
            loadtest.run_level(srv, ["word " * 120], concurrency=1, max_tokens=16)
        assert srv.running  # refused by the client: the server never saw it
    assert not srv.running and gone(pid) and server.running_servers() == []


def test_a_folder_that_is_not_a_model_is_refused_before_anything_starts(tmp_path):
    with pytest.raises(export.NotAModelFolder, match="lacks config.json"):
        server.LocalServer(tmp_path)


def test_a_busy_port_is_named(tiny_run):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(server.PortBusy, match=f"port {port}"):
            server.LocalServer(tiny_run["trained"], port=port).start()
    assert server.running_servers() == []


def test_a_server_that_does_not_come_up_in_time_is_stopped(tiny_run):
    srv = server.LocalServer(tiny_run["trained"], start_timeout=0.3)
    with pytest.raises(server.ServerDidNotStart, match="within 0.3 s"):
        srv.start()
    assert not srv.running and gone(srv.process.pid)


def test_a_server_that_exits_while_starting_shows_its_log(tiny_run, tmp_path):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_run["trained"], broken)
    (broken / "model.safetensors").write_bytes(b"not safetensors")
    srv = server.LocalServer(broken)
    with pytest.raises(server.ServerDidNotStart, match="exited with status"):
        srv.start()
    assert gone(srv.process.pid)


def test_stop_kills_the_whole_group_even_when_the_leader_ignores_sigterm(tiny_run):
    srv = server.LocalServer(tiny_run["trained"], stop_timeout=0.5).start()
    os.kill(srv.process.pid, signal.SIGSTOP)  # a frozen server: SIGTERM is not handled, SIGKILL is
    assert srv.stop() == -signal.SIGKILL and gone(srv.process.pid)
