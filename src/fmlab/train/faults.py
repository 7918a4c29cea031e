"""Fault injection for recovery drills: kill or hang one rank at a step, or kill it in the middle of a save.

    # rank 1 is SIGKILLed before step 5; torchrun restarts both workers, they resume from the newest checkpoint
    torchrun --nproc-per-node 2 --max-restarts 1 -m fmlab.train --checkpoint-dir ck --checkpoint-every 2 \\
        --fault kill --fault-step 5 --fault-rank 1
    # rank 1 hangs before step 5: rank 0 fails after --collective-timeout seconds, it never waits forever
    torchrun --nproc-per-node 2 -m fmlab.train --collective-timeout 5 --fault hang --fault-step 5 --fault-rank 1
    # rank 1 freezes at step 5 with the default timeouts: rank 0 names it within 2 minutes (fmlab.hangs.analysis)
    torchrun --nproc-per-node 2 -m fmlab.train --max-steps 8 --fault freeze --fault-step 5 --fault-rank 1
    # rank 1 dies inside the save of step 4, its shards written, before the commit: the previous checkpoint is used
    torchrun --nproc-per-node 2 --max-restarts 1 -m fmlab.train --checkpoint-dir ck --checkpoint-every 2 \\
        --fault kill-save --fault-step 4 --fault-rank 1

Each kind looks to the other ranks like the real fault it stands for:
  kill       SIGKILL at the start of step N, before its forward pass: the kernel's OOM killer, a crash. The
             others' next collective fails at once (gloo: "Connection closed by peer"). On SageMaker a process
             that dies is the script failing, an AlgorithmError: RetryStrategy does not retry it.
  lose-host  the whole instance is lost at the start of step N: in the sandbox the process leaves the host's
             lost-instance mark ($FMLAB_SANDBOX_LOST_MARKER) and is SIGKILLed, and the sandbox reports what
             SageMaker reports for a lost instance, an InternalServerError, which RetryStrategy retries (the lost
             host replaced, the others rebooted). Outside the sandbox it is a kill.
  hang       at the start of step N the process sleeps for ever: alive, its connections open, but it never joins
             another collective (a deadlock, a stuck data loader). The others wait --collective-timeout seconds,
             then fail; torchrun's SIGTERM then ends the sleeper at once.
  freeze     SIGSTOP at the start of step N: the same to the others, but the process is frozen (a host that
             stopped scheduling it). A stopped process keeps SIGTERM pending, so torchrun waits its 30 s grace
             before it sends SIGKILL: a frozen peer costs the timeout plus 30 s.
  stall      sleeps --fault-seconds at the start of step N, then carries on: a slow rank, not a dead one (a large
             first forward, a compile); at step 1 the long first-phase timeout (--init-timeout) must absorb it.
  skip       at step N the rank skips its share of the gradient all-reduce (DDP's no_sync; plain DDP only):
             a rank-dependent branch around a collective. Its later collectives are one out of step with
             the others' (a desync), which the collective traces name (fmlab.hangs.analysis).
  spike      at the start of step N every weight matrix gets noise of standard deviation SPIKE_NOISE, the same on
             every rank (the replicas stay equal): the loss jumps, as after a bad batch or an overflowed update. --loss-alert stops the run
             at the next logged loss, before it saves the diverged model (module 12's loss alert).
  kill-save  SIGKILL inside the checkpoint save of step N, once this rank's shards are written (the
             torch.distributed.checkpoint save returned) and before the commit (its rank file, the rename to
             step_N, the COMPLETE marker): the save stays `.incomplete-step_N`, which a resume never picks.
A fault fires only when TORCHELASTIC_RESTART_COUNT equals --fault-attempt (default 0: the first start, and any
run outside torchrun), so the workers torchrun restarts run clean, and only on global rank --fault-rank. With a
checkpoint folder it fires once per drill: it leaves `fault-fired-<kind>-step<N>-rank<R>` there before it strikes,
and a later start that finds it (a torchrun restart on the same disk, or a SageMaker retry, which copies the
checkpoint folder back) runs clean. It says what it does on stderr (`fault: ...`) just before. `Faults.none()` (the default, --fault none) does nothing.
Tested by tests/train/test_faults.py.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp

from fmlab.parallel.mesh import restart_attempt
from fmlab.train.config import TrainConfig, TrainConfigError

KINDS = ("none", "kill", "hang", "freeze", "stall", "skip", "kill-save", "lose-host", "spike")
SPIKE_NOISE = 1.0  # spike: noise of this standard deviation added to every weight matrix, as a bad update leaves them
# The sandbox tells each host's processes where to leave the mark of a lost instance (fmlab.sandbox.supervisor).
LOST_MARKER_VARIABLE = "FMLAB_SANDBOX_LOST_MARKER"
_MID_SAVE = "killed (SIGKILL) in a checkpoint save, shards written, before the commit,"


@dataclass
class Faults:
    """The fault this process is to suffer, if any; the training loop calls before_step and saving."""

    kind: str = "none"
    step: int = 0
    seconds: float = 0.0  # how long a stall sleeps
    rank: int = 0  # the global rank it strikes
    attempt: int = 0  # the restart attempt (TORCHELASTIC_RESTART_COUNT) it fires in
    armed: bool = False  # True on the rank and attempt it fires in
    fired: bool = False
    marker: Path | None = None  # left in the checkpoint folder when it fires: a later start never fires again
    _originals: dict = field(default_factory=dict, repr=False, compare=False)  # what the kill-save hook replaced

    @classmethod
    def none(cls) -> Faults:
        return cls()

    @classmethod
    def from_config(cls, cfg: TrainConfig, rank: int, world_size: int, env=None) -> Faults:
        """The fault `cfg` asks for, armed on its rank and attempt; TrainConfigError (with the fix) if it cannot
        fire as written."""
        kind = cfg.fault or "none"
        if kind not in KINDS:
            raise TrainConfigError(f"--fault must be one of {', '.join(KINDS)}, not {kind!r}")
        if kind == "none":
            return cls.none()
        flag = f"--fault {kind} --fault-step {cfg.fault_step}"
        if not 1 <= cfg.fault_step <= cfg.max_steps:
            raise TrainConfigError(f"{flag}: --fault-step must be a step of the run, 1..{cfg.max_steps}")
        if not 0 <= cfg.fault_rank < world_size:
            raise TrainConfigError(f"{flag}: --fault-rank {cfg.fault_rank} is not a rank of this world of "
                                   f"{world_size} processes (0..{world_size - 1})")
        if kind == "stall" and not cfg.fault_seconds > 0:
            raise TrainConfigError(f"{flag}: --fault-seconds must say how long the rank stalls (seconds > 0)")
        if kind == "skip" and (cfg.parallel.sharding != "none" or cfg.parallel.tp != 1):
            raise TrainConfigError(f"{flag}: skips DDP's gradient all-reduce, so it needs plain DDP (--sharding none "
                                   f"--tp 1), not --sharding {cfg.parallel.sharding} --tp {cfg.parallel.tp}")
        if cfg.fault_attempt < 0:
            raise TrainConfigError(f"{flag}: --fault-attempt must be 0 (the first start) or more")
        if kind == "kill-save":
            saves = cfg.checkpoint_dir and ((cfg.checkpoint_every and cfg.fault_step % cfg.checkpoint_every == 0)
                                            or cfg.fault_step == cfg.max_steps)
            if not saves:
                raise TrainConfigError(f"{flag} would never fire: no checkpoint is saved at step {cfg.fault_step} "
                                       f"(--checkpoint-dir {cfg.checkpoint_dir or '(none)'}, --checkpoint-every "
                                       f"{cfg.checkpoint_every}): set a checkpoint dir and pick a step where one is "
                                       f"saved")
        marker = Path(cfg.checkpoint_dir) / f"fault-fired-{kind}-step{cfg.fault_step}-rank{cfg.fault_rank}" \
            if cfg.checkpoint_dir else None
        already = marker is not None and marker.exists()  # a SageMaker retry copies it back with the checkpoints
        on_rank = rank == cfg.fault_rank or kind == "spike"  # a spike strikes the model, so every replica
        armed = on_rank and restart_attempt(env) == cfg.fault_attempt and not already
        return cls(kind, cfg.fault_step, cfg.fault_seconds, cfg.fault_rank, cfg.fault_attempt, armed, marker=marker)

    def _strike(self, what: str, sig: int | None) -> None:
        self.fired = True
        if self.marker is not None:
            self.marker.parent.mkdir(parents=True, exist_ok=True)
            self.marker.write_text(f"{self.kind} at step {self.step} on rank {self.rank}\n")
        sys.stdout.flush()
        node = f" on {os.environ['SLURMD_NODENAME']}" if os.environ.get("SLURMD_NODENAME") else ""  # under Slurm
        print(f"fault: rank {self.rank}{node} {what} at step {self.step} (attempt {self.attempt}, --fault "
              f"{self.kind})", file=sys.stderr, flush=True)
        if sig is not None:
            os.kill(os.getpid(), sig)

    def before_step(self, step: int) -> None:
        """At the start of `step`: kill or stop this process if that is the drill."""
        if not self.armed or self.fired or step != self.step:
            return
        if self.kind == "kill":
            self._strike("killed (SIGKILL)", signal.SIGKILL)
        elif self.kind == "lose-host":
            lost = os.environ.get(LOST_MARKER_VARIABLE)
            if lost:
                Path(lost).write_text(f"instance lost at step {self.step} (--fault lose-host on rank {self.rank})\n")
            self._strike("loses its instance (SIGKILL)", signal.SIGKILL)
        elif self.kind == "freeze":
            self._strike("freezes (SIGSTOP)", signal.SIGSTOP)  # until SIGCONT, or torchrun's SIGKILL
        elif self.kind == "stall":
            self._strike(f"stalls {self.seconds:g} s", None)
            time.sleep(self.seconds)
        elif self.kind == "hang":
            self._strike("hangs (sleeps for ever, joins no collective)", None)
            while True:
                time.sleep(3600)

    def spiking(self, step: int, model) -> None:
        """At the start of `step`, for spike: seeded noise added to every weight matrix (each rank's local shard),
        the same on every rank, so replicas stay equal."""
        if not (self.armed and not self.fired and self.kind == "spike" and step == self.step):
            return
        self._strike(f"spikes the loss (noise of std {SPIKE_NOISE:g} added to every weight matrix)", None)
        generator = torch.Generator().manual_seed(step)
        with torch.no_grad():
            for p in model.parameters():
                local = p.to_local() if hasattr(p, "to_local") else p  # a DTensor's shard on this rank
                if p.dim() >= 2:
                    noise = torch.randn(local.shape, generator=generator) * SPIKE_NOISE
                    local.add_(noise.to(device=local.device, dtype=local.dtype))

    def skipping(self, step: int, model):
        """Around the step's forward and backward: for skip, DDP's no_sync(), so this rank issues no gradient
        all-reduce in `step` while the others do."""
        if not (self.armed and not self.fired and self.kind == "skip" and step == self.step):
            return contextlib.nullcontext()
        self._strike("skips its gradient all-reduce", None)
        return model.no_sync()

    @contextlib.contextmanager
    def saving(self, step: int):
        """Around the checkpoint save of `step`: for kill-save, this process dies right after its shards are
        written, before the save is committed. The hook wraps torch.distributed.checkpoint's `save` and
        `async_save` (which the checkpointer looks up on that module, `dcp.save`, at each save) from here until it
        fires or `disarm()`: a save the checkpointer writes in the background is struck when its write ends,
        before its commit can start."""
        if self.armed and not self.fired and self.kind == "kill-save" and step == self.step:
            self._install()
        yield

    def disarm(self) -> None:
        """Put torch.distributed.checkpoint's functions back (the hook does so itself once it fired)."""
        for name, original in self._originals.items():
            setattr(dcp, name, original)
        self._originals.clear()

    def _install(self) -> None:
        for name, wrap in (("save", self._after_save), ("async_save", self._after_async_save)):
            original = getattr(dcp, name, None)
            if original is not None and name not in self._originals:
                self._originals[name] = original
                setattr(dcp, name, wrap(original))

    def _after_save(self, original):
        def save(*args, **kwargs):
            result = original(*args, **kwargs)  # returns once every rank's shards are written
            self.disarm()
            self._strike(_MID_SAVE, signal.SIGKILL)
            return result

        return save

    def _after_async_save(self, original):
        """async_save returns a future (or a response holding `upload_completion`) that the checkpointer waits
        on before it commits: hand it a gate that opens only after the strike, so no commit can begin first."""
        def async_save(*args, **kwargs):
            response = original(*args, **kwargs)
            written = getattr(response, "upload_completion", response)
            gate: Future = Future()

            def strike(done) -> None:
                self.disarm()
                self._strike(_MID_SAVE, signal.SIGKILL)
                error = done.exception()  # reached only when the kill is faked (tests)
                if error is not None:
                    gate.set_exception(error)
                else:
                    gate.set_result(done.result())

            written.add_done_callback(strike)
            if written is response:
                return gate
            response.upload_completion = gate
            return response

        return async_save
