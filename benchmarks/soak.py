"""Soak test of issue 30 ("nothing lost, whatever breaks"): one campaign run for ``--duration`` (20
minutes by default) while this harness breaks what is around it, at random moments:

- ``--kills`` times (5) it kills the campaign and its workers with SIGKILL, then reruns the same command;
- once it fills the file system the campaign folder lives on (a size-limited tmpfs this harness mounts,
  as root), waits for the campaign to stop in one line with exit 2, frees the space and reruns it;
- once it kills the campaign, checkpoints the store and writes 4 KiB of zeros in its middle, checks that
  ``dlcfuzz bugs`` refuses in one line with exit 2, runs ``dlcfuzz store rebuild`` and reruns it.

After every step it prints the committed tests and the bugs the store lists; at the end, every bug ever
listed must still be in the store (listed, or merged into another's root cause by a reduction), else it
exits 1.  The default backends pair ONNX Runtime with a test backend with planted bugs (many distinct
bugs in minutes, so that a loss shows); ``--backends ort,tvm`` soaks real compilers.

    python benchmarks/soak.py --duration 20m
    python benchmarks/soak.py --duration 4m --kills 5     # a short run
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dlcfuzz.cli.options import duration
from dlcfuzz.run.store import StoreError, StoreReader, checkpoint

ROOT = Path(__file__).resolve().parent.parent


def snapshot(folder: Path) -> tuple[int, set[str], set[str]]:
    """(committed tests, signatures the store lists, every signature in the store)."""
    store = StoreReader(folder)
    try:
        rows = store.bug_rows()
        return len(store.tests()), {r["signature"] for r in rows if not r["same_as"]}, {r["signature"] for r in rows}
    finally:
        store.close()


def mount_tmpfs(where: Path, mib: int) -> str | None:
    """Mounts a tmpfs of ``mib`` MiB at ``where``; the reason it could not, or None."""
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={mib}m", "tmpfs", str(where)], capture_output=True,
                       text=True)
    return None if r.returncode == 0 else (r.stderr.strip() or f"mount exited {r.returncode}")


def fill(where: Path) -> Path:
    """Writes a file into ``where`` until its file system is full."""
    filler = where / "filler"
    with open(filler, "wb", buffering=0) as f:  # unbuffered: closing it has nothing left to write
        for chunk in (1 << 20, 1 << 12, 1 << 9):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError:
                pass
    return filler


class Soak:
    def __init__(self, args: argparse.Namespace, folder: Path, can_fill: bool) -> None:
        self.args, self.folder, self.can_fill = args, folder, can_fill
        self.out = folder / "campaign"
        self.end = time.monotonic() + args.duration
        self.proc: subprocess.Popen | None = None
        self.ever: set[str] = set()
        path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
        self.env = dict(os.environ, PYTHONPATH=path)  # tests.fake_backends, for the default backends
        self.env.setdefault("DLCFUZZ_CACHE", str(folder.parent / "cache"))
        self.t0 = time.monotonic()
        self.stderr = folder.parent / "campaign.stderr"

    def command(self) -> list[str]:
        left = max(5, int(self.end - time.monotonic()))
        return [sys.executable, "-m", "dlcfuzz.cli", "fuzz", "--backends", self.args.backends,
                "--seed", str(self.args.seed), "--budget", f"{left}s", "--reduce-budget", self.args.reduce_budget,
                "--jobs", str(self.args.jobs), "--out", str(self.out)]

    def start(self) -> None:
        with open(self.stderr, "w") as err:  # the child keeps its own descriptor
            self.proc = subprocess.Popen(self.command(), env=self.env, stdout=subprocess.DEVNULL, stderr=err,
                                         start_new_session=True)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "dlcfuzz.cli", *args], capture_output=True, text=True,
                              env=self.env, timeout=600)

    def report(self, step: str) -> None:
        try:
            tests, listed, stored = snapshot(self.out)
        except StoreError as e:
            print(f"{time.monotonic() - self.t0:7.0f}s  {step:<34} store unreadable: {e}", flush=True)
            return
        self.ever |= listed
        lost = self.ever - stored
        print(f"{time.monotonic() - self.t0:7.0f}s  {step:<34} tests {tests:>6}  listed bugs {len(listed):>4}  "
              f"ever listed {len(self.ever):>4}  lost {len(lost)}", flush=True)

    def wait_until(self, when: float) -> None:
        while time.monotonic() < when and self.proc is not None and self.proc.poll() is None:
            time.sleep(0.5)

    def event(self, what: str) -> None:
        if what == "kill":
            self.kill()
            self.report("kill -9")
        elif what == "fill":
            filler = fill(self.folder)
            try:
                self.proc.wait(timeout=180)
                line = self.stderr.read_text().strip().splitlines()[-1:] or [""]
                print(f"          the campaign stopped, exit {self.proc.returncode}: {line[0][:300]}", flush=True)
            except subprocess.TimeoutExpired:
                print("          the campaign did not stop within 180 s of the disk filling: killed", flush=True)
                self.kill()
            self.report("disk full")
            filler.unlink()
        elif what == "damage":
            self.kill()
            self.report("kill -9, before the damage")
            checkpoint(self.out)  # the WAL into the file, so that the damage shows
            path = self.out / "campaign.sqlite"
            with open(path, "r+b") as f:
                f.seek(path.stat().st_size // 2 // 4096 * 4096)
                f.write(b"\0" * 4096)
            r = self.cli("bugs", str(self.out))
            print(f"          dlcfuzz bugs on the damaged store: exit {r.returncode}, "
                  f"{r.stderr.count(chr(10))} line(s): {r.stderr.strip()[:300]}", flush=True)
            r = self.cli("store", "rebuild", str(self.out))
            print("          " + "\n          ".join(r.stdout.strip().splitlines()[:4]), flush=True)
            self.report("damaged, rebuilt")

    def run(self) -> int:
        span = self.args.duration
        events = ["kill"] * self.args.kills + (["fill"] if self.can_fill else []) + ["damage"]
        rng = random.Random(self.args.seed)
        times = sorted(rng.uniform(0.1 * span, 0.9 * span) for _ in events)
        rng.shuffle(events)
        self.start()
        for at, what in zip(times, events, strict=True):
            self.wait_until(self.t0 + at)
            if self.proc.poll() is not None:  # ended early (its budget, or an error): say so, rerun
                print(f"          the campaign ended by itself, exit {self.proc.returncode}", flush=True)
            self.event(what)
            self.start()
        self.proc.wait()
        self.report(f"end (exit {self.proc.returncode})")
        _, listed, stored = snapshot(self.out)
        lost = self.ever - stored
        merged = (self.ever & stored) - listed
        print(f"every bug ever listed: {len(self.ever)}; still listed: {len(self.ever & listed)}; merged into a root "
              f"cause since: {len(merged)}; lost: {len(lost)}{' ' + ', '.join(sorted(lost)) if lost else ''}")
        return 1 if lost else 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=duration, default=1200.0, help="how long the campaign runs (default 20m)")
    p.add_argument("--kills", type=int, default=5, help="SIGKILLs at random moments (default 5)")
    p.add_argument("--backends", default="ort,tests.fake_backends:Planted")
    p.add_argument("--reduce-budget", default="0", help="fuzz --reduce-budget (default 0: no reduction)")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tmpfs-mb", type=int, default=256, help="size of the file system the campaign lives on")
    p.add_argument("--keep", action="store_true", help="copy the campaign out of the tmpfs at the end")
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="dlcfuzz-soak-"))
    folder = base / "fs"
    why = mount_tmpfs(folder, args.tmpfs_mb)
    filling = "the disk filled once" if why is None else f"no disk filling ({why})"
    print(f"soak: {args.duration:.0f} s, {args.kills} kills, {filling}, the store damaged once; {base}", flush=True)
    soak = Soak(args, folder, why is None)
    try:
        return soak.run()
    finally:
        soak.kill()
        if why is None:
            if args.keep:
                shutil.copytree(folder / "campaign", base / "campaign", ignore=shutil.ignore_patterns("filler"))
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


if __name__ == "__main__":
    sys.exit(main())
