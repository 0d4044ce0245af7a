"""Shell text read as the shell runs it (inputs/shell.py, issue 30): what a line-by-line split got wrong, each
case the way deployment scripts write it."""

from __future__ import annotations

import pytest

from pytest_gpulayout.artifacts.commands import find_in_argv, find_in_text
from pytest_gpulayout.errors import InputError
from pytest_gpulayout.inputs.shell import read_argv, read_script


def _engines(text: str, env: dict[str, str] | None = None) -> list[tuple[int, tuple[str, ...]]]:
    return [(c.line, c.argv) for c in read_script(text, env).commands if c.argv[:1] in (("vllm",), ("python3",))]


def test_a_quoted_json_argument_across_continuations_is_one_word() -> None:
    text = ("vllm serve Qwen/Qwen3-8B \\\n  --tensor-parallel-size 2 \\\n  --compilation-config '{\"level\": 3,\n"
            "    \"cudagraph_capture_sizes\": [1, 2]}' \\\n  --max-model-len 8192\n")
    [inv] = find_in_text(text, "serve.sh")
    assert inv.args == ("Qwen/Qwen3-8B", "--tensor-parallel-size", "2", "--compilation-config",
                        '{"level": 3,\n    "cudagraph_capture_sizes": [1, 2]}', "--max-model-len", "8192")
    assert inv.source == "serve.sh:1"


def test_a_heredoc_body_is_data_unless_a_shell_reads_it() -> None:
    text = ("cat > /etc/notes <<EOF\nvllm serve not/this -tp 2\nEOF\n"
            "bash <<'EOF'\nvllm serve but/this -tp 4\nEOF\n")
    assert [(i.source, i.args[0]) for i in find_in_text(text, "s.sh")] == [("s.sh:5", "but/this")]


def test_variables_from_the_script_and_the_environment() -> None:
    text = ("MODEL=${MODEL:-Qwen/Qwen3-8B}\nNODES=2\nGPUS=${GPUS_PER_NODE:-8}\n"
            "vllm serve $MODEL --tensor-parallel-size $GPUS --pipeline-parallel-size $((NODES)) "
            "--data-parallel-size ${DP}\n")
    [(line, argv)] = _engines(text)
    assert argv == ("vllm", "serve", "Qwen/Qwen3-8B", "--tensor-parallel-size", "8", "--pipeline-parallel-size",
                    "2", "--data-parallel-size", "${DP}")
    [cmd] = [c for c in read_script(text).commands if c.argv[0] == "vllm"]
    assert cmd.unknown == ("${DP}",) and line == 4   # an unknown variable is named, not dropped
    [(_, given)] = _engines(text, {"MODEL": "meta-llama/Llama-3.1-8B", "GPUS_PER_NODE": "4", "DP": "2"})
    assert given[2] == "meta-llama/Llama-3.1-8B" and given[4] == "4" and given[-1] == "2"


def test_arithmetic_and_parameter_forms() -> None:
    text = ("N=3; M=model.tar.gz\nvllm serve ${M%%.*} --tp $(( (N + 1) * 2 )) --max-model-len $((1<<13)) "
            "--served-model-name ${M/model/x} --x ${#M} ${UNSET:+never} \"${EMPTY:-fallback}\"\n")
    [(_, argv)] = _engines(text)
    assert argv == ("vllm", "serve", "model", "--tp", "8", "--max-model-len", "8192", "--served-model-name",
                    "x.tar.gz", "--x", "12", "fallback")


def test_launchers_are_skipped_with_their_options() -> None:
    text = ("srun --nodes=2 -N 2 --ntasks-per-node 1 --gres gpu:8 -l \\\n  bash -lc -- 'vllm serve a -tp 8'\n"
            "mpirun -np 2 -x NCCL_DEBUG=INFO --mca btl tcp --allow-run-as-root python3 -m sglang.launch_server "
            "--model-path b --tp 2\n"
            "nohup timeout -s INT 600 numactl --cpunodebind=0 -m 0 taskset -c 0-7 vllm serve c > log 2>&1 &\n"
            "torchrun --nproc-per-node=2 --standalone -m sglang.launch_server --model-path d\n"
            "exec env -u FOO VLLM_USE_V1=1 stdbuf -oL vllm serve e\n"
            "ray job submit --address http://127.0.0.1:8265 --working-dir . -- vllm serve f -pp 2\n")
    found = find_in_text(text, "run.sh")
    assert [(i.source, i.engine, i.args[:2] if i.engine == "sglang" else i.args[:1]) for i in found] == [
        ("run.sh:2", "vllm", ("a",)), ("run.sh:3", "sglang", ("--model-path", "b")), ("run.sh:4", "vllm", ("c",)),
        ("run.sh:5", "sglang", ("--model-path", "d")), ("run.sh:6", "vllm", ("e",)), ("run.sh:7", "vllm", ("f",))]
    assert found[1].env["NCCL_DEBUG"] == "INFO" and found[4].env["VLLM_USE_V1"] == "1"


def test_docker_run_gives_the_image_and_its_own_environment() -> None:
    text = ("export HF_TOKEN=secret LOCAL_ONLY=1\n"
            "docker run --gpus all -it --rm -e HF_TOKEN -e VLLM_LOGGING_LEVEL=DEBUG --ipc=host -p 8000:8000 \\\n"
            "  vllm/vllm-openai:v0.10.2 --model Qwen/Qwen3-8B -tp 2\n"
            "docker run --entrypoint python3 lmsysorg/sglang:v0.5.4 -m sglang.launch_server --model-path x --tp 4\n")
    vllm, sglang = find_in_text(text, "up.sh")
    assert (vllm.image, vllm.entry, vllm.args) == ("vllm/vllm-openai:v0.10.2", "vllm serve",
                                                   ("--model", "Qwen/Qwen3-8B", "-tp", "2"))
    assert dict(vllm.env) == {"HF_TOKEN": "secret", "VLLM_LOGGING_LEVEL": "DEBUG"}  # not LOCAL_ONLY
    assert (sglang.image, sglang.args[-1]) == ("lmsysorg/sglang:v0.5.4", "4")


def test_a_child_shell_sees_what_was_exported() -> None:
    text = ("export TP=4\nPP=2\nbash -c 'vllm serve m --tp $TP --pp ${PP:-1}'\n"
            "sh -c \"vllm serve m --tp $TP --pp $PP\"\n"
            "bash -ec 'exec vllm serve \"$0\" --tp \"$1\"' some/model 8\n")
    assert [a[1][2:] for a in _engines(text)] == [("m", "--tp", "4", "--pp", "1"), ("m", "--tp", "4", "--pp", "2"),
                                                  ("some/model", "--tp", "8")]


def test_a_loop_over_literal_words_runs_once_per_word_and_functions_where_called() -> None:
    text = ("serve() {\n  vllm serve \"$1\" --port \"$2\" &\n}\nfor p in 8000 8001; do serve m $p; done\n"
            "unused() { vllm serve never; }\n")
    assert [a[1][2:] for a in _engines(text)] == [("m", "--port", "8000"), ("m", "--port", "8001")]


def test_kubernetes_exec_form_with_a_multi_line_shell_script() -> None:
    argv = ["/bin/bash", "-c", "set -ex\npip install foo\nvllm serve $(MODEL_ID) \\\n  --tensor-parallel-size $TP\n"]
    [inv] = find_in_argv(argv, "Deployment/x/c", {"TP": "2"}, "vllm/vllm-openai:v0.9.2")
    assert inv.args == ("$(MODEL_ID)", "--tensor-parallel-size", "2") and inv.unknown == ("$(MODEL_ID)",)
    [cmd] = [c for c in read_argv(argv, {"TP": "2"}).commands if c.argv[0] == "vllm"]
    assert cmd.line == 3 and cmd.via == ("bash -c",)


def test_a_line_the_shell_cannot_read_is_one_error_where_it_runs_an_engine() -> None:
    with pytest.raises(InputError) as err:
        find_in_text("echo ok\nvllm serve 'Qwen/Qwen3-8B -tp 2\n", "bad.sh")
    assert str(err.value).startswith("bad.sh:2: the shell cannot read this: vllm serve 'Qwen/Qwen3-8B")
    assert find_in_text("echo 'unclosed\n", "other.sh") == []   # no engine there: not this tool's business
