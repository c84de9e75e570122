"""A one-node SLURM cluster on this machine for the SLURM tests: munge, slurmctld and slurmd
started as root with their state, spool and logs under a temporary folder, and stopped by
their own process ids. Where the daemons or root are missing, `skip_reason` says which."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel")


def skip_reason() -> str | None:
    missing = [
        d for d in DAEMONS if shutil.which(d) is None and not Path(f"/usr/sbin/{d}").exists()
    ]
    if missing:
        return (
            f"no SLURM here ({', '.join(missing)} missing): apt-get install slurm-wlm munge "
            "runs a one-node cluster for these tests"
        )
    if os.geteuid() != 0:
        return "the one-node SLURM cluster starts its daemons as root"
    return None


def _conf(folder: Path, cpus: int) -> str:
    host = socket.gethostname()
    return "\n".join(
        [
            "ClusterName=calbench",
            f"SlurmctldHost={host}",
            "AuthType=auth/munge",
            f"AuthInfo=socket={folder}/munge/munge.socket",
            "CredType=cred/munge",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={folder}/state",
            f"SlurmdSpoolDir={folder}/spool",
            f"SlurmctldPidFile={folder}/slurmctld.pid",
            f"SlurmdPidFile={folder}/slurmd.pid",
            f"SlurmctldLogFile={folder}/log/slurmctld.log",
            f"SlurmdLogFile={folder}/log/slurmd.log",
            "SlurmctldPort=16817",
            "SlurmdPort=16818",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core_Memory",
            "ReturnToService=2",
            "KillWait=2",
            "MinJobAge=600",
            f"NodeName={host} CPUs={cpus} RealMemory=16000 State=UNKNOWN",
            "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
            "",
        ]
    )


def _sbin(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


@contextlib.contextmanager
def one_node_cluster(folder: Path, cpus: int = 2):
    """Start the cluster; yields the environment (``SLURM_CONF``) its clients need."""
    folder = Path(folder)
    for sub in ("state", "spool", "log", "munge"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    key = folder / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    (folder / "slurm.conf").write_text(_conf(folder, cpus))
    env = {**os.environ, "SLURM_CONF": str(folder / "slurm.conf")}
    m = folder / "munge"
    pids = [m / "munged.pid", folder / "slurmctld.pid", folder / "slurmd.pid"]
    try:
        subprocess.run(
            [_sbin("munged"), f"--key-file={key}", f"--socket={m}/munge.socket",
             f"--pid-file={m}/munged.pid", f"--log-file={m}/munged.log", f"--seed-file={m}/seed",
             "-f"],
            check=True, env=env,
        )  # fmt: skip
        subprocess.run([_sbin("slurmctld"), "-f", str(folder / "slurm.conf")], check=True, env=env)
        subprocess.run([_sbin("slurmd"), "-f", str(folder / "slurm.conf")], check=True, env=env)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            idle = subprocess.run(
                ["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, env=env
            )
            if idle.stdout.strip() == "idle":
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the SLURM node never became idle; see {folder}/log")
        yield env
    finally:
        for pid_file in reversed(pids):
            with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGTERM)
        time.sleep(1)
