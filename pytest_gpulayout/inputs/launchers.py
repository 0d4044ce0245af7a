"""The commands that run another command: their options, so that what they launch is found after them.

Each entry says which options take no value (``flags``) and, where most options are flags, which do take one
(``valued``); ``--opt=value`` and attached short values (``-n4``) are one word either way. The tables are the
tools' own manuals: Slurm ``srun(1)``, Open MPI ``mpirun(1)`` / MPICH Hydra ``mpiexec``, PyTorch ``torchrun``
(``torch/distributed/run.py``), coreutils ``timeout``/``nice``/``stdbuf``/``env``, util-linux ``taskset``/
``setsid``/``chrt``/``ionice``, ``numactl(8)``, ``docker run`` / ``podman run``, Apptainer ``exec``, ``sudo(8)``,
``ssh(1)``, ``ray job submit``, ``kubectl exec``, ``uv run``, ``conda run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    """How one launcher's options read."""

    #: options that take no value (a short cluster of them, ``-it``, is flags too)
    flags: frozenset[str] = frozenset()
    #: where set, only these take a value and every other option is a flag
    valued: frozenset[str] | None = None
    #: options that take two values (``--mca key value``)
    two: frozenset[str] = frozenset()
    #: positional words before the command (``timeout DURATION``, ``taskset MASK``, ``gosu USER``)
    positionals: int = 0
    #: long options written with one dash (Open MPI's ``-np 4``, ``-x VAR``)
    single_dash_long: bool = False


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


SRUN = Options(flags=_f("-E", "-h", "-H", "-I", "-k", "-K", "-l", "-O", "-Q", "-s", "-u", "-v", "-V", "-X", "-Z",
                        "--exclusive", "--label", "--overlap", "--pty", "--unbuffered", "--verbose", "--quiet",
                        "--kill-on-bad-exit", "--no-kill", "--oversubscribe", "--overcommit", "--contiguous",
                        "--exact", "--whole", "--multi-prog", "--disable-status", "--preserve-env", "--immediate",
                        "--hold", "--test-only", "--spread-job", "--use-min-nodes", "--help", "--usage",
                        "--version", "--no-allocate", "--x11", "--nodes-ignore"))
MPIRUN = Options(flags=_f("--allow-run-as-root", "-allow-run-as-root", "--oversubscribe", "-oversubscribe",
                          "--tag-output", "-tag-output", "--timestamp-output", "--report-bindings",
                          "-report-bindings", "-v", "--verbose", "-q", "--quiet", "--display-map", "-display-map",
                          "--display-allocation", "--noprefix", "--nooversubscribe", "-d", "--debug",
                          "--merge-stderr-to-stdout", "--use-hwthread-cpus", "-V", "--version", "-l", "-prepend-rank",
                          "-print-rank-map", "--do-not-resolve", "-bootstrap-exec-args"),
                 two=_f("--mca", "-mca", "--gmca", "-gmca", "-genv", "-env", "--prtemca", "--pmixmca"),
                 single_dash_long=True)
TORCHRUN = Options(flags=_f("--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m",
                            "--module"))
DOCKER_RUN = Options(flags=_f("-d", "--detach", "-i", "--interactive", "-t", "--tty", "--rm", "-P", "--publish-all",
                              "--privileged", "--init", "--read-only", "--no-healthcheck", "--oom-kill-disable",
                              "--help", "-q", "--quiet", "--disable-content-trust", "--use-api-socket"))
DOCKER_EXEC = Options(flags=_f("-d", "--detach", "-i", "--interactive", "-t", "--tty", "--privileged"))
APPTAINER = Options(flags=_f("--nv", "--nvccli", "--rocm", "-c", "--contain", "-C", "--containall", "-e",
                             "--cleanenv", "-w", "--writable", "--writable-tmpfs", "--no-home", "-f", "--fakeroot",
                             "-u", "--userns", "--no-mount", "-i", "--ipc", "-p", "--pid", "--compat"))
SSH = Options(valued=_f("-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m", "-O", "-o", "-p",
                        "-Q", "-R", "-S", "-W", "-w", "-B", "-P"), positionals=1)
SUDO = Options(valued=_f("-u", "--user", "-g", "--group", "-C", "--close-from", "-D", "--chdir", "-h", "--host",
                         "-p", "--prompt", "-r", "--role", "-t", "--type", "-U", "--other-user", "-T",
                         "--command-timeout"))
TIMEOUT = Options(flags=_f("--preserve-status", "--foreground", "-v", "--verbose"), positionals=1)
NUMACTL = Options(flags=_f("-l", "--localalloc", "-a", "--all", "-s", "--show", "-H", "--hardware", "--balancing",
                           "-b"))
TASKSET = Options(flags=_f("-a", "--all-tasks", "-c", "--cpu-list"), positionals=1)
NICE = Options(valued=_f("-n", "--adjustment"))
IONICE = Options(valued=_f("-c", "--class", "-n", "--classdata"))
CHRT = Options(flags=_f("-a", "-b", "-d", "-f", "-i", "-m", "-o", "-r", "-R", "-v", "--all-tasks", "--batch",
                        "--deadline", "--fifo", "--idle", "--other", "--rr", "--reset-on-fork", "--verbose"),
               positionals=1)
STDBUF = Options(valued=_f("-i", "-o", "-e", "--input", "--output", "--error"))
TIME = Options(valued=_f("-f", "--format", "-o", "--output"))
EXEC = Options(valued=_f("-a"))
SETSID = Options(valued=_f())
NOHUP = Options(valued=_f())
TINI = Options(valued=_f("-p", "-e"))
DUMB_INIT = Options(valued=_f("-r", "--rewrite"))
GOSU = Options(valued=_f(), positionals=1)
UV_RUN = Options(flags=_f("--no-project", "--isolated", "--frozen", "--locked", "--no-sync", "--active",
                          "--all-extras", "--all-packages", "--no-dev", "--offline", "-q", "--quiet", "-v",
                          "--verbose", "--no-cache", "-n", "--exact", "--no-config", "--no-env-file",
                          "--script", "-s", "--module", "-m"))
CONDA_RUN = Options(valued=_f("-n", "--name", "-p", "--prefix", "--cwd"))
PIXI_RUN = Options(valued=_f("-e", "--environment", "--manifest-path"))
RAY_SUBMIT = Options(flags=_f("--no-wait", "-v", "--verbose"))
KUBECTL_EXEC = Options(flags=_f("-i", "--stdin", "-t", "--tty", "-q", "--quiet"))

#: the commands that run the rest of their words as a command (after their options)
LAUNCHERS: dict[str, Options] = {
    "srun": SRUN, "mpirun": MPIRUN, "mpiexec": MPIRUN, "orterun": MPIRUN, "mpiexec.hydra": MPIRUN,
    "torchrun": TORCHRUN, "nohup": NOHUP, "timeout": TIMEOUT, "numactl": NUMACTL, "taskset": TASKSET,
    "nice": NICE, "ionice": IONICE, "chrt": CHRT, "stdbuf": STDBUF, "time": TIME, "exec": EXEC, "setsid": SETSID,
    "tini": TINI, "dumb-init": DUMB_INIT, "gosu": GOSU, "su-exec": GOSU, "sudo": SUDO, "unbuffer": NOHUP,
    "xvfb-run": NOHUP, "command": NOHUP, "builtin": NOHUP, "ssh": SSH,
}
#: ``tool sub`` pairs that launch: ``docker run``, ``uv run``, ``ray job submit`` ...
SUBCOMMANDS: dict[tuple[str, ...], Options] = {
    ("docker", "run"): DOCKER_RUN, ("docker", "container", "run"): DOCKER_RUN, ("podman", "run"): DOCKER_RUN,
    ("nerdctl", "run"): DOCKER_RUN, ("docker", "exec"): DOCKER_EXEC, ("podman", "exec"): DOCKER_EXEC,
    ("apptainer", "exec"): APPTAINER, ("singularity", "exec"): APPTAINER, ("uv", "run"): UV_RUN,
    ("conda", "run"): CONDA_RUN, ("mamba", "run"): CONDA_RUN, ("micromamba", "run"): CONDA_RUN,
    ("pixi", "run"): PIXI_RUN, ("poetry", "run"): NOHUP, ("pipenv", "run"): NOHUP, ("hatch", "run"): NOHUP,
    ("ray", "job", "submit"): RAY_SUBMIT, ("kubectl", "exec"): KUBECTL_EXEC, ("oc", "exec"): KUBECTL_EXEC,
}
#: launchers whose operand before the command is an image (``docker run IMAGE``) or a container
IMAGE_FIRST = frozenset({("docker", "run"), ("docker", "container", "run"), ("podman", "run"), ("nerdctl", "run"),
                         ("apptainer", "exec"), ("singularity", "exec")})
CONTAINER_FIRST = frozenset({("docker", "exec"), ("podman", "exec")})


def _takes_value(opt: str, spec: Options) -> bool:
    if spec.valued is not None:
        return opt in spec.valued
    return opt not in spec.flags


def split_options(words: Sequence[str], spec: Options) -> tuple[list[tuple[str, str | None]], int]:
    """``([(option, value or None), ...], index of the first word after them)``, the options read as the
    launcher reads them: ``--`` ends them, ``--opt=value``, ``--opt value`` where it takes one, a cluster of
    flags (``-it``), an attached short value (``-n4``), and ``-np 4`` where long options take one dash."""
    opts: list[tuple[str, str | None]] = []
    i = 0
    while i < len(words):
        w = words[i]
        if w == "--":
            return opts, i + 1
        if not w.startswith("-") or w == "-":
            break
        long = w.startswith("--") or (spec.single_dash_long and len(w) > 2)
        name, eq, attached = w.partition("=") if long else (w[:2], "", w[2:])
        if name in spec.two:
            opts.append((name, " ".join(words[i + 1:i + 3])))
            i += 3
            continue
        if long:
            if eq:
                opts.append((name, attached))
            elif _takes_value(name, spec) and i + 1 < len(words):
                opts.append((name, words[i + 1]))
                i += 1
            else:
                opts.append((name, None))
        elif attached and all(not _takes_value(f"-{c}", spec) for c in attached):
            opts += [(f"-{c}", None) for c in w[1:]]        # -it: flags
        elif attached:
            opts.append((name, attached) if _takes_value(name, spec) else (w, None))  # -n4, or nice's -10
        elif _takes_value(name, spec) and i + 1 < len(words):
            opts.append((name, words[i + 1]))
            i += 1
        else:
            opts.append((name, None))
        i += 1
    return opts, i
