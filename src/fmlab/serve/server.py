"""A real inference server for the exported model: `transformers serve` as a child process, always stopped.

    with LocalServer("runs/export") as server:           # starts, waits for GET /health, stops on exit
        server.complete("To be, or not", max_tokens=16)   # the openai client against /v1/completions
        for piece in server.stream("To be, or not"): ...  # streaming (server-sent events)
    running_servers()                                     # [] : nothing left behind

Why this server (compared with `pip install --dry-run` on 2026-11-23, see notebook 10): transformers' own
`transformers serve` (transformers 5.23.0, already this course's dependency; it needs fastapi, uvicorn, openai
and accelerate from PyPI, none of which changes torch) exposes an OpenAI-compatible API (/v1/completions,
/v1/chat/completions, streaming) on CPU, loads any folder `from_pretrained` loads, and batches continuously
(`--continuous-batching`, a paged KV cache). vLLM 0.32.0 from PyPI is its CUDA build: it would add ~80
packages (CUDA runtime, triton, flashinfer) and downgrade transformers to 5.19.0; its CPU backend is built from
source or installed from vLLM's own wheel index, not PyPI. LitServe 0.2.19 installs cleanly (5 small
packages), but it is a framework: model loading, the generation loop, token streaming and batching would be
our code in a LitAPI. So: transformers serve.

The server runs in its own session (process group): `stop()` sends SIGTERM to the group, then SIGKILL after
`stop_timeout`, and waits; it runs on leaving the `with` block, on an error while starting, and at interpreter
exit (atexit). Bad input gets an error that names the cause: `NotAModelFolder` (fmlab.serve.export),
`PortBusy`, `ServerDidNotStart` (with the end of the server's log), `PromptTooLong` (checked with the model's
own tokenizer before anything is sent: the server itself would run a too-long prompt past the context).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from transformers import AutoTokenizer

from fmlab.environment import free_port
from fmlab.serve.export import check_model_folder

SERVER = "transformers serve"
_LIVE: weakref.WeakSet = weakref.WeakSet()


class ServerError(RuntimeError):
    """The local inference server could not do what was asked; the message says why."""


class PortBusy(ServerError):
    """The port the server should listen on is already taken."""


class ServerDidNotStart(ServerError):
    """The server exited, or did not answer /health, within the start timeout."""


class PromptTooLong(ValueError):
    """A prompt (plus the tokens asked for) longer than the model's context."""


@dataclass
class ServerConfig:
    """How the server is started. The continuous-batching pool is sized for a tiny model on a CPU: `cb_num_blocks`
    x `cb_block_size` tokens of KV cache (left to itself, transformers sizes it from the device's memory, which
    on a CPU takes ~20 s to allocate)."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port
    continuous_batching: bool = True
    cb_num_blocks: int = 128
    cb_block_size: int = 32
    cb_max_batch_tokens: int = 1024
    threads: int = 1  # OMP_NUM_THREADS of the server process
    start_timeout: float = 90.0  # seconds to wait for GET /health
    stop_timeout: float = 5.0  # seconds between SIGTERM and SIGKILL
    log_level: str = "warning"


def port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def running_servers() -> list[LocalServer]:
    """The servers started by this process that are still running."""
    return [s for s in list(_LIVE) if s.running]


def _stop_all() -> None:
    for s in list(_LIVE):
        s.stop()


atexit.register(_stop_all)


class LocalServer:
    """`transformers serve <folder>` on this machine, as a context manager (see the module docstring)."""

    def __init__(self, model_dir: str | Path, config: ServerConfig | None = None, **overrides):
        self.model_dir = check_model_folder(model_dir).resolve()
        self.config = config or ServerConfig()
        for key, value in overrides.items():
            if not hasattr(self.config, key):
                raise TypeError(f"ServerConfig has no setting {key!r}")
            setattr(self.config, key, value)
        self.port = self.config.port
        self.process: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.started_s: float | None = None  # seconds from launch to a healthy /health
        self._context = json.loads((self.model_dir / "config.json").read_text()).get("max_position_embeddings")
        self._tokenizer = None
        self._client = None  # the openai client complete() and stream() share

    # ------------------------------------------------------------------ lifecycle

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def model(self) -> str:
        """The model name requests carry (the folder, as the server loaded it)."""
        return str(self.model_dir)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        c = self.config
        cmd = [sys.executable, "-m", "transformers.cli.transformers", "serve", str(self.model_dir), "--device", "cpu",
               "--host", c.host, "--port", str(self.port), "--log-level", c.log_level]
        if c.continuous_batching:
            cmd += ["--continuous-batching", "--cb-num-blocks", str(c.cb_num_blocks), "--cb-block-size",
                    str(c.cb_block_size), "--cb-max-batch-tokens", str(c.cb_max_batch_tokens)]
        return cmd

    def start(self) -> LocalServer:
        """Launch the server and wait until GET /health answers 200; stopped again if it does not."""
        import httpx

        if self.running:
            return self

        self.port = self.config.port or free_port()
        if not port_free(self.config.host, self.port):
            raise PortBusy(f"port {self.port} on {self.config.host} is already in use: stop what listens there, or "
                           "start the server with port=0 (a free port)")
        log_dir = Path(tempfile.mkdtemp(prefix="fmlab-serve-"))
        self.log_path = log_dir / "server.log"
        cache = log_dir / "hf-cache"
        cache.mkdir()
        env = {**os.environ, "OMP_NUM_THREADS": str(self.config.threads), "HF_HUB_OFFLINE": "1",
               "HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_CACHE": str(cache),
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
        start = time.perf_counter()
        # One client for every poll: httpx.get builds an SSL context per call (~35 ms of CPU, the CA bundle read
        # again), taken from the server starting beside it on a small machine.
        health = httpx.Client(timeout=1.0)
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                            start_new_session=True)
        _LIVE.add(self)
        deadline = start + self.config.start_timeout
        try:
            while True:
                if self.process.poll() is not None:
                    tail = self.log_tail()
                    if "address already in use" in tail.lower():
                        raise PortBusy(f"port {self.port} was taken before the server could bind it: start again "
                                       "with port=0")
                    raise ServerDidNotStart(f"{SERVER} exited with status {self.process.returncode} while starting:"
                                            f"\n{tail}")
                with contextlib.suppress(httpx.HTTPError):
                    if health.get(f"{self.base_url}/health").status_code == 200:
                        break
                if time.perf_counter() > deadline:
                    raise ServerDidNotStart(f"{SERVER} did not answer {self.base_url}/health within "
                                            f"{self.config.start_timeout:g} s (a loaded machine, or a model too "
                                            f"large to load in time): raise start_timeout. Its log:\n{self.log_tail()}")
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        finally:
            health.close()
        self.started_s = time.perf_counter() - start
        return self

    def stop(self) -> int | None:
        """Stop the server's whole process group (SIGTERM, then SIGKILL) and wait; its exit status."""
        proc = self.process
        if proc is None:
            return None
        if self._client is not None:  # a restart gets another port
            self._client.close()
            self._client = None
        if proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, self.config.stop_timeout), (signal.SIGKILL, 10.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, sig)
                try:
                    proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        else:  # the leader is gone; make sure nothing it started lingers in its group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        _LIVE.discard(self)
        return proc.returncode

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, lines: int = 15) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").strip().splitlines()[-lines:])

    # ------------------------------------------------------------------ requests

    def tokenizer(self):
        if self._tokenizer is None:
            self._tokenizer = AutoTokenizer.from_pretrained(str(self.model_dir))
        return self._tokenizer

    def check_prompt(self, prompt: str, max_tokens: int) -> int:
        """The prompt's token count; PromptTooLong when prompt + max_tokens exceed the model's context."""
        tokens = len(self.tokenizer()(prompt, verbose=False)["input_ids"])
        if self._context and tokens + max_tokens > self._context:
            raise PromptTooLong(f"the prompt is {tokens} tokens and {max_tokens} more are asked for, "
                                f"{tokens + max_tokens} in all: more than the model's context of {self._context} "
                                f"tokens. Shorten the prompt to at most {self._context - max_tokens} tokens or ask "
                                "for fewer")
        return tokens

    def client(self, asynchronous: bool = False, timeout: float = 60.0):
        """An openai client (OpenAI or AsyncOpenAI) pointed at this server (no API key needed locally)."""
        import openai

        kind = openai.AsyncOpenAI if asynchronous else openai.OpenAI
        return kind(base_url=f"{self.base_url}/v1", api_key="local", timeout=timeout, max_retries=0)

    def _shared_client(self):
        if self._client is None:  # each new client reads the CA bundle again
            self._client = self.client()
        return self._client

    def _require_running(self) -> None:
        if not self.running:
            raise ServerError(f"{SERVER} is not running: start it (with LocalServer(...) as server: ...)")

    def complete(self, prompt: str, max_tokens: int = 16) -> str:
        """One completion (not streamed), through the openai client."""
        self._require_running()
        self.check_prompt(prompt, max_tokens)
        out = self._shared_client().completions.create(model=self.model, prompt=prompt, max_tokens=max_tokens)
        return out.choices[0].text

    def stream(self, prompt: str, max_tokens: int = 16) -> Iterator[str]:
        """A streamed completion: the text pieces as the server sends them (server-sent events)."""
        self._require_running()
        self.check_prompt(prompt, max_tokens)
        for chunk in self._shared_client().completions.create(model=self.model, prompt=prompt,
                                                              max_tokens=max_tokens, stream=True):
            if chunk.choices and chunk.choices[0].text:
                yield chunk.choices[0].text


__all__ = ["LocalServer", "PortBusy", "PromptTooLong", "SERVER", "ServerConfig", "ServerDidNotStart", "ServerError",
           "port_free", "running_servers"]
