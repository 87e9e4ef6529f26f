"""A clean stop on Ctrl-C or SIGTERM: the first finishes the step and saves last.ckpt and model.pt, a second aborts at
once in one line; under trainer=ddp the signals reach the ranks too."""
from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import lightning as L
from lightning.fabric.plugins.environments import SLURMEnvironment, TorchElasticEnvironment

from gpt.overrides import pasted

if TYPE_CHECKING:
    from lightning.pytorch.strategies.launchers import _MultiProcessingLauncher


SIGNAL_NAMES = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}


class Interrupted(RuntimeError):
    """Training stopped on Ctrl-C or SIGTERM with last.ckpt and model.pt saved; the message says how to continue.
    `status` is the exit status a shell gives a process that signal ends (128 + its number: 130, 143)."""

    def __init__(self, message: str, signum: int = signal.SIGINT) -> None:
        super().__init__(message)
        self.status = 128 + signum


def aborted(how: str, step: int | None, checkpoint: Path, signum: int) -> Interrupted:
    """A run ended at once before its model.pt was written (a second Ctrl-C, or a Ctrl-C once training had ended), in
    one line naming the checkpoint it goes on from; `step` None where this process trained none (trainer=ddp)."""
    after = (f"continue from {checkpoint} with the same overrides plus {pasted('ckpt_path', str(checkpoint))} "
             "(or resume=true)" if checkpoint.is_file() else "no checkpoint was written yet: start again")
    where = "" if step is None else f" at step {step}"
    return Interrupted(f"aborted by {how}{where}, before model.pt was written; {after}", signum)


def lightning_answers_sigterm() -> bool:
    """Whether Lightning handles SIGTERM itself: under SLURM (not torchrun inside it) it keeps the process alive
    after SIGTERM, so that its handler of SLURM's requeue signal can save and requeue the job."""
    return SLURMEnvironment.detect() and not TorchElasticEnvironment.detect()


class StopOnInterrupt(L.Callback):
    """The first Ctrl-C finishes the current optimizer step and stops training cleanly, so last.ckpt and
    model.pt are written; a second Ctrl-C interrupts at once. With `sigterm`, SIGTERM (kill, a container's stop, a
    scheduler's preemption, timeout) stops it the same way, and a second signal of either kind interrupts: Lightning's
    own answer to SIGTERM, left to it under SLURM, ended the run at its next step with exit status 0 and no record or
    model.pt. `stop_when` asks the same without a signal (a sweep's worker whose sweep has stopped: a signal of its
    own would be the second Ctrl-C after the user's). Ranks agree before stopping."""

    def __init__(self, stop_when: Callable[[], bool] = lambda: False, sigterm: bool = False) -> None:
        self.requested = False
        self.signum = signal.SIGINT  # the signal that stopped training, for its exit status
        self.how = "by Ctrl-C"  # how training was stopped, for the run's record and its last line
        self.aborted_by: int | None = None  # the signal that then ended the stop at once
        self.stop_when = stop_when
        self.signals = [signal.SIGINT, *([signal.SIGTERM] if sigterm and not lightning_answers_sigterm() else [])]
        self._previous: dict[int, Any] = {}
        self._to_ranks: queue.SimpleQueue[int | None] | None = None  # while trainer=ddp's ranks train (below)

    def __getstate__(self) -> dict[str, Any]:
        # trainer=ddp's ranks get a copy of this callback: the signals are passed on from the process that starts them
        return {**self.__dict__, "_to_ranks": None}

    def _pass_on(self, signum: int) -> None:
        # A queue's put is safe in a signal handler; the ranks may not be started yet (see while_ranks_train)
        if self._to_ranks is not None and signum == signal.SIGTERM:
            self._to_ranks.put(signum)

    def _request(self, signum: int, frame: Any) -> None:
        self._pass_on(signum)
        self.requested = True
        self.signum = signum
        self.how = f"by {SIGNAL_NAMES[signum]}"
        for each in self._previous:
            signal.signal(each, self._abort)

    def _abort(self, signum: int, frame: Any) -> None:
        """A second signal of either kind ends training at once, as Ctrl-C's own handler before the stop did: Python's
        KeyboardInterrupt, or a trainer=ddp rank's exit status that the waiting process reads."""
        self._pass_on(signum)
        self.aborted_by = signum
        previous = self._previous.get(signal.SIGINT)
        if not callable(previous):
            raise KeyboardInterrupt
        previous(signum, frame)

    def abort_how(self) -> str:
        """What ended the stop at once: a second signal of the first one's kind, or the other kind."""
        second = self.aborted_by or signal.SIGINT
        return f"a second {SIGNAL_NAMES[second]}" if second == self.signum else \
            f"{SIGNAL_NAMES[second]} after {SIGNAL_NAMES[self.signum]}"

    def _listen(self, signals: Sequence[int]) -> None:
        # A signal ignored from the start stays ignored: the shell does so for a script's `python train.py &`, so that
        # a Ctrl-C meant for the script's foreground leaves it training.
        self._previous = {signum: signal.signal(signum, self._request) for signum in signals
                          if signal.getsignal(signum) is not signal.SIG_IGN}

    def _stop_listening(self) -> None:
        if not self.requested:
            for signum, handler in self._previous.items():
                signal.signal(signum, handler)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._listen(self.signals)

    @contextmanager
    def while_ranks_train(self, launcher: _MultiProcessingLauncher) -> Iterator[None]:
        """In the process that starts trainer=ddp's ranks (ddp_spawn) and waits for them, training in none of its
        own: Ctrl-C reaches the ranks too, which stop as above, so here the first only notes that it came. Taken as a
        KeyboardInterrupt, Lightning ended this process with exit status 1 and no model.pt, saying nothing. SIGTERM
        reaches this process alone (kill <pid>, a container's stop, timeout), so each one is also sent on to the ranks:
        left to Python, it ended this process at once, and the ranks, told by torch with a SIGINT, stopped as if by
        Ctrl-C with no model.pt."""
        self._to_ranks = queue.SimpleQueue()
        relay = threading.Thread(target=send_to_ranks, args=(self._to_ranks, launcher), daemon=True)
        relay.start()
        self._listen(self.signals)
        try:
            yield
        finally:
            self._stop_listening()
            relayed, self._to_ranks = self._to_ranks, None
            relayed.put(None)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches == 0 and \
                trainer.strategy.reduce_boolean_decision(self.requested or self.stop_when(), all=False):
            if not self.requested:  # its sweep was stopped (Ctrl-C to the sweep's process alone) or died
                self.how = "with its sweep"
            self.requested = True
            trainer.should_stop = True

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.requested and 0 < trainer.max_steps <= trainer.global_step:
            # The signal came as the last step ended: the run has finished, with nothing to continue. Taken as a stop,
            # its record said stopped, and its last line said to continue a run that ckpt_path= then refused as done.
            self.requested = False
        self._stop_listening()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.on_train_end(trainer, pl_module)


def send_to_ranks(signals: queue.SimpleQueue[int | None], launcher: _MultiProcessingLauncher) -> None:
    """Send each signal put in `signals` to trainer=ddp's ranks, until None. One that came while the ranks were being
    started waits for the launcher to know them all: it starts them one by one, each taking seconds to read what it is
    sent, and names none before the last."""
    while (signum := signals.get()) is not None:
        while not launcher.procs:
            time.sleep(0.01)
        launcher.kill(signum)
